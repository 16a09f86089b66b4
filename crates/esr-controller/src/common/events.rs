//! Event notes: the API server refuses an Event whose `note` is longer than 1,024 bytes, so every
//! note is cut to fit ([`capped_note`]) before it is published; the event is then recorded with
//! the start of the text instead of being lost.

/// The longest Event note the API server accepts, in bytes.
pub const NOTE_LIMIT: usize = 1024;

/// What marks a cut note.
const CUT: &str = "...";

/// `text` when it fits in [`NOTE_LIMIT`] bytes; otherwise its longest prefix ending on a
/// character boundary that, followed by `...`, fits.
pub fn capped_note(text: &str) -> String {
    if text.len() <= NOTE_LIMIT {
        return text.to_string();
    }
    let mut end = NOTE_LIMIT - CUT.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_notes_are_kept_and_long_ones_cut_on_a_char_boundary() {
        assert_eq!(capped_note("secret synced"), "secret synced");
        let exact = "a".repeat(NOTE_LIMIT);
        assert_eq!(capped_note(&exact), exact);
        let long = "b".repeat(5000);
        let cut = capped_note(&long);
        assert_eq!(cut.len(), NOTE_LIMIT);
        assert!(cut.ends_with("...") && cut.starts_with("bbb"));
        // 'é' is two bytes: the cut never splits it, and the note stays within the limit.
        let wide = "é".repeat(1000);
        let cut = capped_note(&wide);
        assert!(cut.len() <= NOTE_LIMIT, "{}", cut.len());
        assert_eq!(cut.len(), NOTE_LIMIT - 1);
        assert!(
            cut.trim_end_matches("...")
                .chars()
                .skip(1)
                .all(|c| c == 'é')
        );
    }
}
