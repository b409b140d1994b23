//! Text an agent wrote, made safe to put on an operator's terminal. Agents
//! print whatever their tools print: colour codes, cursor moves, window
//! titles, clipboard writes (OSC 52), bidirectional overrides. The console
//! (its output tail, through `Tails`) and the headless human printer both
//! show agent text only through `printable`, so neither can be driven by
//! it. A leaf: it imports nothing of playdeck.

pub mod fit;

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';

/// `s` without escape sequences (CSI, OSC, DCS and the other string
/// sequences, two-character escapes, their 8-bit C1 forms), without other
/// control characters (tabs and line breaks become spaces, so one event
/// stays one line) and without bidirectional overrides.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_work) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ESC => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // nF escapes: intermediates, then one final character.
                Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
                    while chars
                        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                        .is_some()
                    {}
                    chars.next();
                }
                // A two-character escape (or a lone ESC at the end).
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() || is_bidi_control(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_work(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Embedding, override and isolate controls: they reorder what is shown.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Parameters and intermediates, up to the final byte (`@` to `~`).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
    }
}

/// Up to the string terminator: BEL, ESC `\`, or the 8-bit ST.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | '\u{9c}' => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        let s = "compiling playdeck — 3 warnings ✓";
        assert!(matches!(printable(s), Cow::Borrowed(_)));
    }

    #[test]
    fn escape_sequences_and_controls_are_removed() {
        for (input, want) in [
            ("\x1b[31merror\x1b[0m: boom", "error: boom"),
            ("\x1b[2J\x1b[1;1Hcleared", "cleared"),
            ("\x1b]0;pwned title\x07after", "after"),
            ("\x1b]52;c;ZXZpbA==\x1b\\clip", "clip"),
            ("\x1bP1$r0m\x1b\\dcs", "dcs"),
            ("\x1b(Bcharset", "charset"),
            ("\x1bcreset", "reset"),
            ("\u{9b}31mc1\u{9b}0m", "c1"),
            ("a\tb\r\nc\x07d\x08e\x7f", "a b  cde"),
            ("safe \u{202e}txt.exe", "safe txt.exe"),
            ("dangling \x1b", "dangling "),
            ("\x1b[", ""),
        ] {
            assert_eq!(printable(input), want, "{input:?}");
        }
    }
}
