//! Go's `encoding/pem` `Decode` (junk skipping, headers, CRLF, Go's lenient
//! base64) and `Encode` (64-column lines, sorted headers).

use std::collections::BTreeMap;

use super::encoding::{b64_decode, b64_encode};

/// A PEM block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: String,
    pub headers: BTreeMap<String, String>,
    pub bytes: Vec<u8>,
}

fn get_line(data: &[u8]) -> (&[u8], &[u8]) {
    let (mut i, j) = match data.iter().position(|&c| c == b'\n') {
        Some(i) => (i, i + 1),
        None => (data.len(), data.len()),
    };
    if j != i && i > 0 && data[i - 1] == b'\r' {
        i -= 1;
    }
    let mut line = &data[..i];
    while let Some((&last, rest)) = line.split_last() {
        if last == b' ' || last == b'\t' {
            line = rest;
        } else {
            break;
        }
    }
    (line, &data[j..])
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim_space(b: &[u8]) -> &[u8] {
    let s = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let e = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map(|x| x + 1)
        .unwrap_or(s);
    &b[s..e.max(s)]
}

/// `pem.Decode`: the next block and the rest of the input; `None` and the whole
/// input when there is no further valid block.
pub fn decode(data: &[u8]) -> (Option<Block>, &[u8]) {
    const START: &[u8] = b"\n-----BEGIN ";
    const END: &[u8] = b"\n-----END ";
    const EOL: &[u8] = b"-----";
    let mut rest = data;
    loop {
        if rest.starts_with(&START[1..]) {
            rest = &rest[START.len() - 1..];
        } else if let Some(i) = find(rest, START) {
            rest = &rest[i + START.len()..];
        } else {
            return (None, data);
        }
        let (type_line, r) = get_line(rest);
        rest = r;
        if !type_line.ends_with(EOL) {
            continue;
        }
        let type_line = &type_line[..type_line.len() - EOL.len()];
        let mut headers = BTreeMap::new();
        let mut exhausted = false;
        loop {
            if rest.is_empty() {
                exhausted = true;
                break;
            }
            let (line, next) = get_line(rest);
            let Some(colon) = line.iter().position(|&c| c == b':') else {
                break;
            };
            let key = trim_space(&line[..colon]);
            let val = trim_space(&line[colon + 1..]);
            headers.insert(
                String::from_utf8_lossy(key).into_owned(),
                String::from_utf8_lossy(val).into_owned(),
            );
            rest = next;
        }
        if exhausted {
            return (None, data);
        }
        let (end_index, end_trailer_index) = if headers.is_empty() && rest.starts_with(&END[1..]) {
            (0usize, END.len() - 1)
        } else {
            match find(rest, END) {
                Some(i) => (i, i + END.len()),
                None => continue,
            }
        };
        let end_trailer = &rest[end_trailer_index..];
        let trailer_len = type_line.len() + EOL.len();
        if end_trailer.len() < trailer_len {
            continue;
        }
        let rest_of_end_line = &end_trailer[trailer_len..];
        let end_trailer = &end_trailer[..trailer_len];
        if !end_trailer.starts_with(type_line) || !end_trailer.ends_with(EOL) {
            continue;
        }
        if !get_line(rest_of_end_line).0.is_empty() {
            continue;
        }
        let b64: Vec<u8> = rest[..end_index]
            .iter()
            .copied()
            .filter(|&c| c != b' ' && c != b'\t')
            .collect();
        let Ok(bytes) = b64_decode(&b64) else {
            continue;
        };
        let (_, after) = get_line(&rest[end_index + END.len() - 1..]);
        return (
            Some(Block {
                kind: String::from_utf8_lossy(type_line).into_owned(),
                headers,
                bytes,
            }),
            after,
        );
    }
}

/// `pem.EncodeToMemory`.
pub fn encode(b: &Block) -> String {
    let mut out = format!("-----BEGIN {}-----\n", b.kind);
    if !b.headers.is_empty() {
        if let Some(v) = b.headers.get("Proc-Type") {
            out.push_str(&format!("Proc-Type: {v}\n"));
        }
        for (k, v) in &b.headers {
            if k != "Proc-Type" {
                out.push_str(&format!("{k}: {v}\n"));
            }
        }
        out.push('\n');
    }
    let enc = b64_encode(&b.bytes);
    for chunk in enc.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {}-----\n", b.kind));
    out
}

/// Encodes DER bytes as a PEM block of `kind`.
pub fn encode_der(kind: &str, der: &[u8]) -> String {
    encode(&Block {
        kind: kind.to_string(),
        headers: BTreeMap::new(),
        bytes: der.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_encode() {
        let pem = "junk\n-----BEGIN X-----\nQUJD\n-----END X-----\ntrailer";
        let (b, rest) = decode(pem.as_bytes());
        let b = b.unwrap();
        assert_eq!(b.kind, "X");
        assert_eq!(b.bytes, b"ABC");
        assert_eq!(rest, b"trailer");
        assert_eq!(encode(&b), "-----BEGIN X-----\nQUJD\n-----END X-----\n");
        let crlf = "-----BEGIN X-----\r\nQU\r\nJD\r\n-----END X-----\r\n";
        assert_eq!(decode(crlf.as_bytes()).0.unwrap().bytes, b"ABC");
        let hdr = "-----BEGIN X-----\nProc-Type: 4,ENCRYPTED\nA: b\n\nQUJD\n-----END X-----\n";
        let b = decode(hdr.as_bytes()).0.unwrap();
        assert_eq!(b.headers.len(), 2);
        assert_eq!(encode(&b), hdr);
        assert!(
            decode(b"-----BEGIN X-----\n!!!!\n-----END X-----\n")
                .0
                .is_none()
        );
        assert!(decode(b"no pem").0.is_none());
        assert!(
            decode(b"-----BEGIN X-----\nQUJD\n-----END Y-----\n")
                .0
                .is_none()
        );
        let long = encode_der("D", &[0u8; 60]);
        assert_eq!(long.lines().nth(1).map(str::len), Some(64));
    }
}
