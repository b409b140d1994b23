//! Where the user's files live.

use std::path::PathBuf;

/// `$PLAYDECK_CONFIG_DIR`, else `$XDG_CONFIG_HOME/playdeck`, else
/// `~/.config/playdeck`: the console config, themes and the agents file.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PLAYDECK_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("playdeck"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("playdeck"))
}
