//! Go's `encoding/base64`, `encoding/base32` and `encoding/hex` decoders, with
//! Go's error texts (sprig's `b64dec`, `b32dec` and `hexdec` return the error
//! message as their output, so the texts and byte offsets must match Go's).

use base64::Engine as _;

const B64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B32_ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Go's `base64.CorruptInputError` / `base32.CorruptInputError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorruptInput {
    /// Byte offset Go reports.
    pub offset: usize,
    /// `base64` or `base32`.
    pub scheme: &'static str,
}

impl std::fmt::Display for CorruptInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "illegal {} data at input byte {}",
            self.scheme, self.offset
        )
    }
}

/// `base64.StdEncoding.EncodeToString`.
pub fn b64_encode(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn b64_value(c: u8) -> Option<u8> {
    B64_ALPHABET
        .iter()
        .position(|&a| a == c)
        .and_then(|p| u8::try_from(p).ok())
}

/// `base64.StdEncoding.DecodeString`: padded, `\r` and `\n` ignored, trailing
/// bits not checked (Go's non-strict mode).
pub fn b64_decode(src: &[u8]) -> Result<Vec<u8>, CorruptInput> {
    let err = |offset| CorruptInput {
        offset,
        scheme: "base64",
    };
    let mut out = Vec::with_capacity(src.len() / 4 * 3 + 3);
    let mut si = 0usize;
    loop {
        if si >= src.len() {
            return Ok(out);
        }
        let mut dbuf = [0u8; 4];
        let mut dlen = 4usize;
        let mut j = 0usize;
        let mut finished = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // StdEncoding is padded: a partial quantum is an error.
                return Err(err(si - j));
            }
            let c = src[si];
            si += 1;
            if let Some(v) = b64_value(c) {
                dbuf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(err(si - 1));
            }
            // padding
            match j {
                0 | 1 => return Err(err(si - 1)),
                2 => {
                    while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(err(src.len()));
                    }
                    if src[si] != b'=' {
                        return Err(err(si - 1));
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            if si < src.len() {
                return Err(err(si));
            }
            dlen = j;
            finished = true;
            break;
        }
        let val = (u32::from(dbuf[0]) << 18)
            | (u32::from(dbuf[1]) << 12)
            | (u32::from(dbuf[2]) << 6)
            | u32::from(dbuf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
        if finished {
            return Ok(out);
        }
    }
}

/// `base32.StdEncoding.EncodeToString`.
pub fn b32_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(5) * 8);
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let v = buf.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < chars {
                let idx = ((v >> (35 - 5 * i)) & 0x1f) as usize;
                out.push(char::from(B32_ALPHABET[idx]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `base32.StdEncoding.DecodeString` (newlines are stripped first, as Go does).
pub fn b32_decode(input: &[u8]) -> Result<Vec<u8>, CorruptInput> {
    let err = |offset| CorruptInput {
        offset,
        scheme: "base32",
    };
    let src: Vec<u8> = input
        .iter()
        .copied()
        .filter(|&c| c != b'\r' && c != b'\n')
        .collect();
    let olen = src.len();
    let mut rest: &[u8] = &src;
    let mut out = Vec::with_capacity(olen / 8 * 5 + 5);
    let mut end = false;
    while !rest.is_empty() && !end {
        let mut dbuf = [0u8; 8];
        let mut dlen = 8usize;
        let mut j = 0usize;
        while j < 8 {
            if rest.is_empty() {
                return Err(err(olen - rest.len() - j));
            }
            let c = rest[0];
            rest = &rest[1..];
            if c == b'=' && j >= 2 && rest.len() < 8 {
                if rest.len() + j < 8 - 1 {
                    return Err(err(olen));
                }
                for k in 0..(8 - 1 - j) {
                    if rest.len() > k && rest[k] != b'=' {
                        return Err(err(olen - rest.len() + k - 1));
                    }
                }
                dlen = j;
                end = true;
                if dlen == 1 || dlen == 3 || dlen == 6 {
                    return Err(err(olen - rest.len() - 1));
                }
                break;
            }
            match B32_ALPHABET.iter().position(|&a| a == c) {
                Some(p) => dbuf[j] = p as u8,
                None => return Err(err(olen - rest.len() - 1)),
            }
            j += 1;
        }
        let mut q = [0u8; 5];
        q[4] = (dbuf[6] << 5) | dbuf[7];
        q[3] = (dbuf[4] << 7) | (dbuf[5] << 2) | (dbuf[6] >> 3);
        q[2] = (dbuf[3] << 4) | (dbuf[4] >> 1);
        q[1] = (dbuf[1] << 6) | (dbuf[2] << 1) | (dbuf[3] >> 4);
        q[0] = (dbuf[0] << 3) | (dbuf[1] >> 2);
        let n = match dlen {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => 0,
        };
        out.extend_from_slice(&q[..n]);
    }
    Ok(out)
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Go's `%#U` of a byte-valued rune: `U+007A 'z'`.
fn sharp_u(b: u8) -> String {
    let c = char::from(b);
    if c.is_control() || (0x7f..0xa0).contains(&b) || b == 0xad {
        format!("U+{:04X}", b)
    } else {
        format!("U+{:04X} '{}'", b, c)
    }
}

/// `hex.DecodeString`, with Go's error texts.
pub fn hex_decode(src: &[u8]) -> Result<Vec<u8>, String> {
    let invalid = |b: u8| format!("encoding/hex: invalid byte: {}", sharp_u(b));
    let mut out = Vec::with_capacity(src.len() / 2);
    let mut j = 1;
    while j < src.len() {
        let (p, q) = (src[j - 1], src[j]);
        let a = hex_val(p).ok_or_else(|| invalid(p))?;
        let b = hex_val(q).ok_or_else(|| invalid(q))?;
        out.push((a << 4) | b);
        j += 2;
    }
    if src.len() % 2 == 1 {
        let last = src[j - 1];
        if hex_val(last).is_none() {
            return Err(invalid(last));
        }
        return Err("encoding/hex: odd length hex string".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip_and_errors() {
        assert_eq!(b64_encode(b"hello"), "aGVsbG8=");
        assert_eq!(b64_decode(b"aGVsbG8=").unwrap(), b"hello");
        assert_eq!(b64_decode(b"aGVs\r\nbG8=").unwrap(), b"hello");
        assert_eq!(b64_decode(b"").unwrap(), b"");
        assert_eq!(
            b64_decode(b"not base64!").unwrap_err().to_string(),
            "illegal base64 data at input byte 3"
        );
        assert_eq!(b64_decode(b"-_8=").unwrap_err().offset, 0);
        assert_eq!(b64_decode(b"aGVsbG8").unwrap_err().offset, 4);
        assert_eq!(b64_decode(b"aGVsbG8=x").unwrap_err().offset, 8);
        assert_eq!(b64_decode(b"aGVsbA=").unwrap_err().offset, 7);
        assert_eq!(b64_decode(b"aGVsbA==").unwrap(), b"hell");
        assert_eq!(b64_decode(b"a===").unwrap_err().offset, 1);
        // trailing bits are not checked (non-strict)
        assert_eq!(b64_decode(b"aGVsbB==").unwrap(), b"hell");
    }

    #[test]
    fn base32_roundtrip_and_errors() {
        assert_eq!(b32_encode(b"hello"), "NBSWY3DP");
        assert_eq!(b32_encode(b"f"), "MY======");
        assert_eq!(b32_encode(b"fooba"), "MZXW6YTB");
        assert_eq!(b32_encode(b"foob"), "MZXW6YQ=");
        assert_eq!(b32_decode(b"NBSWY3DP").unwrap(), b"hello");
        assert_eq!(b32_decode(b"MY======").unwrap(), b"f");
        assert_eq!(b32_decode(b"MZXW6YQ=").unwrap(), b"foob");
        assert_eq!(
            b32_decode(b"NBSW!3DP").unwrap_err().to_string(),
            "illegal base32 data at input byte 4"
        );
        assert!(b32_decode(b"NBSWY3D").is_err());
    }

    #[test]
    fn hex_errors() {
        assert_eq!(hex_decode(b"68656c6c6f").unwrap(), b"hello");
        assert_eq!(hex_decode(b"4A4B").unwrap(), b"JK");
        assert_eq!(
            hex_decode(b"zz").unwrap_err(),
            "encoding/hex: invalid byte: U+007A 'z'"
        );
        assert_eq!(
            hex_decode(b"abc").unwrap_err(),
            "encoding/hex: odd length hex string"
        );
        assert_eq!(
            hex_decode(b"abz").unwrap_err(),
            "encoding/hex: invalid byte: U+007A 'z'"
        );
        assert_eq!(
            hex_decode(b"0\n").unwrap_err(),
            "encoding/hex: invalid byte: U+000A"
        );
    }
}
