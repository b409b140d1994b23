//! Themes: TOML files, the built-in ones embedded, a user's file of the
//! same name in `<config>/themes/` winning, extra user themes joining the
//! cycle. Unknown keys are errors naming the file and the key.

use std::path::Path;
use std::str::FromStr;

use ratatui::style::Color;
use serde::Deserialize;

const BUILTIN: [(&str, &str); 4] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    colors: Colors,
    lanes: LaneColors,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Colors {
    background: String,
    foreground: String,
    dim: String,
    accent: String,
    border: String,
    border_focused: String,
    header_bg: String,
    header_fg: String,
    selection_bg: String,
    selection_fg: String,
    warning: String,
    error: String,
    ok: String,
    gauge: String,
    gauge_bg: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LaneColors {
    queued: String,
    running: String,
    awaiting_approval: String,
    paused: String,
    succeeded: String,
    failed: String,
    skipped: String,
    escalated: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub background: Color,
    pub foreground: Color,
    pub dim: Color,
    pub accent: Color,
    pub border: Color,
    pub border_focused: Color,
    pub header_bg: Color,
    pub header_fg: Color,
    pub selection_bg: Color,
    pub selection_fg: Color,
    pub warning: Color,
    pub error: Color,
    pub ok: Color,
    pub gauge: Color,
    pub gauge_bg: Color,
    /// queued, running, awaiting, paused, succeeded, failed, escalated
    pub lanes: [Color; 7],
    pub skipped: Color,
}

impl Theme {
    /// A lane column's colour: its lane's, or the skipped colour.
    pub fn col(&self, col: usize) -> Color {
        self.lanes.get(col).copied().unwrap_or(self.skipped)
    }
}

/// A colour as a theme writes it. ratatui's own parser reads the names
/// (`red`, `light-blue`, `dark-gray`…), `#rrggbb` and ANSI indices
/// (`0`–`255`); `default` is our word for the terminal's own colour.
fn color(s: &str, key: &'static str) -> Result<Color, NotAColour> {
    let s = s.trim();
    if s == "default" {
        return Ok(Color::Reset);
    }
    Color::from_str(s).map_err(|_| NotAColour {
        key,
        value: s.to_string(),
    })
}

/// A theme value that is not a colour: its key, the value and what is
/// allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{key}` = {value:?} is not a colour; allowed: \"#rrggbb\", an ANSI index 0-255, \"default\", or a name (black, red, green, yellow, blue, magenta, cyan, gray, dark-gray, light-red, light-green, light-yellow, light-blue, light-magenta, light-cyan, white)"
)]
pub struct NotAColour {
    pub key: &'static str,
    pub value: String,
}

pub use crate::play::diag::{FileError, located};

/// A theme file that cannot be used, named, with why.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{file}: {error}")]
    Colour { file: String, error: NotAColour },
}

impl Theme {
    /// Parses theme TOML; `file` names it in errors.
    pub fn parse(name: &str, file: &str, text: &str) -> Result<Theme, ThemeError> {
        let t: ThemeFile = FileError::toml(file, text)?;
        let c = &t.colors;
        let l = &t.lanes;
        let f = |v: &str, k: &'static str| {
            color(v, k).map_err(|error| ThemeError::Colour {
                file: file.to_string(),
                error,
            })
        };
        Ok(Theme {
            name: name.to_string(),
            background: f(&c.background, "colors.background")?,
            foreground: f(&c.foreground, "colors.foreground")?,
            dim: f(&c.dim, "colors.dim")?,
            accent: f(&c.accent, "colors.accent")?,
            border: f(&c.border, "colors.border")?,
            border_focused: f(&c.border_focused, "colors.border_focused")?,
            header_bg: f(&c.header_bg, "colors.header_bg")?,
            header_fg: f(&c.header_fg, "colors.header_fg")?,
            selection_bg: f(&c.selection_bg, "colors.selection_bg")?,
            selection_fg: f(&c.selection_fg, "colors.selection_fg")?,
            warning: f(&c.warning, "colors.warning")?,
            error: f(&c.error, "colors.error")?,
            ok: f(&c.ok, "colors.ok")?,
            gauge: f(&c.gauge, "colors.gauge")?,
            gauge_bg: f(&c.gauge_bg, "colors.gauge_bg")?,
            lanes: [
                f(&l.queued, "lanes.queued")?,
                f(&l.running, "lanes.running")?,
                f(&l.awaiting_approval, "lanes.awaiting_approval")?,
                f(&l.paused, "lanes.paused")?,
                f(&l.succeeded, "lanes.succeeded")?,
                f(&l.failed, "lanes.failed")?,
                f(&l.escalated, "lanes.escalated")?,
            ],
            skipped: f(&l.skipped, "lanes.skipped")?,
        })
    }

    /// True for themes without colour, which lean on bold and reverse.
    pub fn is_mono(&self) -> bool {
        self.foreground == Color::Reset && self.accent == Color::Reset
    }
}

/// The built-in themes, then user themes from `dir` (a user file with a
/// built-in's name replaces it); the first bad file is the error.
pub fn load_all(dir: Option<&Path>) -> Result<Vec<Theme>, ThemeError> {
    let (themes, errors) = load_each(dir);
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(themes),
    }
}

/// [`load_all`], reading every file whatever the others hold: the themes
/// that could be used, and an error for each file that could not (so a
/// config with several bad themes is fixed in one pass).
pub fn load_each(dir: Option<&Path>) -> (Vec<Theme>, Vec<ThemeError>) {
    let mut errors = Vec::new();
    let mut themes: Vec<Theme> = Vec::new();
    for (name, text) in BUILTIN {
        match Theme::parse(name, &format!("<built-in {name}.toml>"), text) {
            Ok(t) => themes.push(t),
            Err(e) => errors.push(e),
        }
    }
    let Some(dir) = dir else {
        return (themes, errors);
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (themes, errors);
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for path in files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let theme = FileError::read(&path)
            .map_err(ThemeError::from)
            .and_then(|text| Theme::parse(&name, &path.display().to_string(), &text));
        match theme {
            Ok(theme) => match themes.iter_mut().find(|t| t.name == name) {
                Some(t) => *t = theme,
                None => themes.push(theme),
            },
            Err(e) => errors.push(e),
        }
    }
    (themes, errors)
}

pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_themes_parse() {
        let themes = load_all(None).unwrap();
        assert_eq!(
            themes.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["default", "light", "high-contrast", "mono"]
        );
        assert!(themes[3].is_mono());
        assert!(!themes[0].is_mono());
    }

    #[test]
    fn unknown_keys_and_bad_colours_name_the_file() {
        let text = include_str!("../../themes/default.toml")
            .replace("[lanes]", "[lanes]\nsparkle = \"#ffffff\"");
        let e = Theme::parse("x", "x.toml", &text).unwrap_err().to_string();
        assert!(
            e.starts_with("x.toml:") && e.contains("unknown field `sparkle`"),
            "{e}"
        );
        let text = include_str!("../../themes/default.toml")
            .replace("accent = \"#7aa2f7\"", "accent = \"teal-ish\"");
        let e = Theme::parse("x", "x.toml", &text).unwrap_err().to_string();
        assert_eq!(e.split(": ").next(), Some("x.toml"));
        assert!(
            e.contains("`colors.accent` = \"teal-ish\" is not a colour"),
            "{e}"
        );
    }

    #[test]
    fn colours_are_read_by_ratatui() {
        assert_eq!(color("default", "k"), Ok(Color::Reset));
        assert_eq!(color("#0a0B0c", "k"), Ok(Color::Rgb(10, 11, 12)));
        assert_eq!(color("light-blue", "k"), Ok(Color::LightBlue));
        assert_eq!(color("dark grey", "k"), Ok(Color::DarkGray));
        assert_eq!(color("208", "k"), Ok(Color::Indexed(208)));
        assert!(color("#12345", "k").is_err());
    }

    #[test]
    fn user_themes_override_and_extend() {
        let dir = tempfile::tempdir().unwrap();
        let light = include_str!("../../themes/light.toml").replace("#2563eb", "#123456");
        std::fs::write(dir.path().join("light.toml"), &light).unwrap();
        std::fs::write(
            dir.path().join("ocean.toml"),
            include_str!("../../themes/default.toml"),
        )
        .unwrap();
        let themes = load_all(Some(dir.path())).unwrap();
        assert_eq!(themes.len(), 5);
        assert_eq!(themes[1].accent, Color::Rgb(0x12, 0x34, 0x56));
        assert_eq!(themes[4].name, "ocean");
    }
}
