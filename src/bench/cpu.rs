//! CPU time read from `/proc` (Linux): what a bench's process, a child process or one named
//! thread has used, so rows can give CPU per turn beside turns/s. Each reader returns `None`
//! where `/proc` does not say (another OS, a process or thread that is gone).

/// CPU seconds (user + system) this process has used, from `/proc/self/stat` (Linux).
pub(crate) fn cpu_seconds() -> Option<f64> {
    cpu_seconds_in("/proc/self/stat")
}

/// CPU seconds (user + system) process `pid` has used (Linux).
pub(crate) fn cpu_seconds_of(pid: u32) -> Option<f64> {
    cpu_seconds_in(&format!("/proc/{pid}/stat"))
}

/// CPU seconds (user + system) of this process's live threads named `name` (an ASCII name;
/// the kernel keeps a thread's first 15 bytes); `None` when no such thread runs (or not on
/// Linux).
pub(crate) fn thread_cpu_seconds(name: &str) -> Option<f64> {
    let kept = &name[..name.len().min(15)];
    let mut total = None;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let named =
            std::fs::read_to_string(dir.join("comm")).is_ok_and(|comm| comm.trim_end() == kept);
        if named {
            let used = cpu_seconds_in(&dir.join("stat").to_string_lossy()).unwrap_or(0.0);
            total = Some(total.unwrap_or(0.0) + used);
        }
    }
    total
}

fn cpu_seconds_in(path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel reports these in clock ticks of USER_HZ, 100 on every Linux platform.
    Some(ticks as f64 / 100.0)
}

/// Named groups of processes whose CPU time a bench reads before and after a run, so a row can
/// say which of them a turn cost (the bench's own clients, the replicas, the balancer, Redis).
#[derive(Default)]
pub(crate) struct Groups(Vec<(&'static str, Vec<u32>)>);

impl Groups {
    /// Adds `pids` as the group `name` (`None` pids, of children already gone, are left out).
    pub(crate) fn with(
        mut self,
        name: &'static str,
        pids: impl IntoIterator<Item = Option<u32>>,
    ) -> Self {
        self.0.push((name, pids.into_iter().flatten().collect()));
        self
    }

    /// Each group's CPU seconds so far, `None` where `/proc` did not say for one of its pids.
    pub(crate) fn read(&self) -> Vec<Option<f64>> {
        self.0
            .iter()
            .map(|(_, pids)| pids.iter().map(|&pid| cpu_seconds_of(pid)).sum())
            .collect()
    }

    /// `{"group": ms per turn, ...}` of `turns` from two readings (a group without both left
    /// out).
    pub(crate) fn per_turn_ms(
        &self,
        before: &[Option<f64>],
        after: &[Option<f64>],
        turns: usize,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        for (((name, _), b), a) in self.0.iter().zip(before).zip(after) {
            if let (Some(b), Some(a)) = (b, a)
                && turns > 0
            {
                let ms = (a - b) * 1000.0 / turns as f64;
                out.insert(name.to_string(), serde_json::json!(super::round(ms, 3)));
            }
        }
        out
    }
}
