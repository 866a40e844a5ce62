//! The one rule for every seconds setting (config keys, flags, environment variables): a
//! number a [`std::time::Duration`] and any clock reading can take.

/// The largest seconds setting accepted: 10^9 s, about 31 years. Larger values could not be
/// added to a clock reading without overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// Checks a seconds setting named `key`: a number (not NaN) `> 0`, or `>= 0` when `zero_ok`,
/// and at most [`MAX_SECONDS`].
///
/// # Errors
/// A message naming the key, the value and what is expected.
pub fn check_seconds(key: &str, value: f64, zero_ok: bool) -> Result<(), String> {
    let above = if zero_ok { value >= 0.0 } else { value > 0.0 };
    if above && value <= MAX_SECONDS {
        return Ok(());
    }
    let bound = if zero_ok { ">= 0" } else { "> 0" };
    Err(format!(
        "{key}: expected a number of seconds {bound} and at most {MAX_SECONDS:e}, got {value}"
    ))
}
