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
