//! Short words for times and names that the panes, the status line and
//! the app's messages share: below both the app and its panes, so
//! neither reaches into the other for them.

/// `12.3s`, `4m05s`, `1h02m`.
pub fn duration(secs: f64) -> String {
    let secs = secs.max(0.0);
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else if secs < 3600.0 {
        format!("{}m{:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}m",
            (secs / 3600.0) as u64,
            ((secs % 3600.0) / 60.0) as u64
        )
    }
}

/// An instance's name without the run's prefix, which every one shares.
pub fn short_instance<'a>(name: &'a str, run_id: &str) -> &'a str {
    name.strip_prefix("loop-")
        .and_then(|r| r.strip_prefix(run_id))
        .and_then(|r| r.strip_prefix('-'))
        .unwrap_or(name)
}

/// `2.5s`, `12s`, `4m05`, `1h02`: at most four columns, for lane rows.
pub fn short_time(secs: f64) -> String {
    let secs = secs.max(0.0);
    if secs < 10.0 {
        format!("{secs:.1}s")
    } else if secs < 60.0 {
        format!("{}s", secs as u64)
    } else if secs < 3600.0 {
        format!("{}m{:02}", (secs / 60.0) as u64, (secs % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}",
            (secs / 3600.0) as u64,
            ((secs % 3600.0) / 60.0) as u64
        )
    }
}
