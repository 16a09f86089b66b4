//! Text users read in events and status.
//!
//! - Event notes: the API server refuses an Event whose `note` is longer than 1,024 bytes, so
//!   every note is cut to fit ([`capped_note`]) before it is published; the event is then
//!   recorded with the start of the text instead of being lost.
//! - Kubernetes API errors: [`kube_error_text`] gives the API server's message, as client-go
//!   (and so ESO) prints an error (`secrets "x" is forbidden: ...`). kube's own `Display` of an
//!   API error appends the `Debug` rendering of the whole response, which is not for users; every
//!   kind uses this function wherever a Kubernetes error reaches a status, an event or a
//!   condition message.

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

/// A Kubernetes API error as client-go prints it: the API server's message (`secrets "x" is
/// forbidden: ...`), not kube's `Debug` rendering of the whole response. Other errors (transport,
/// decoding) keep their own text.
pub fn kube_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        kube::Error::Api(s) => format!("kubernetes API error (HTTP {})", s.code),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kube_api_error_reads_as_the_api_servers_message() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.to_string(),
                reason: "Forbidden".to_string(),
                ..Default::default()
            }))
        };
        let e = status(403, r#"secrets "db" is forbidden: no"#);
        // kube's own Display carries the Debug dump of the response.
        assert!(e.to_string().contains("Status {"), "{e}");
        assert_eq!(kube_error_text(&e), r#"secrets "db" is forbidden: no"#);
        assert_eq!(
            kube_error_text(&status(500, "")),
            "kubernetes API error (HTTP 500)"
        );
    }

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
