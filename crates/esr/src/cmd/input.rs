//! Reading the files given to `esr validate`, `render`, `template` and `migrate`: at most
//! [`MAX_INPUT_BYTES`] per file, so that `/dev/zero`, a FIFO or a huge file fails with a clear
//! error instead of reading until the process runs out of memory.

use std::io::Read;
use std::path::Path;

/// The largest input file, in bytes (16 MiB: far above any manifest; the API server itself
/// refuses objects above about 1.5 MiB).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a UTF-8 text file of at most [`MAX_INPUT_BYTES`] (`std::fs::read_to_string` with a cap).
pub fn read_input(path: &Path) -> std::io::Result<String> {
    read_capped(path, MAX_INPUT_BYTES)
}

fn read_capped(path: &Path, max: u64) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is larger than {max} bytes (the input limit)"),
        ));
    }
    String::from_utf8(buf).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_inputs_stop_at_the_cap() {
        let zero = Path::new("/dev/zero");
        if !zero.exists() {
            return;
        }
        let e = read_input(zero).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            format!("the file is larger than {MAX_INPUT_BYTES} bytes (the input limit)")
        );
    }

    #[test]
    fn files_up_to_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.yaml");
        std::fs::write(&p, "kind: X\n").unwrap();
        assert_eq!(read_input(&p).unwrap(), "kind: X\n");
        std::fs::write(&p, "12345").unwrap();
        assert_eq!(read_capped(&p, 5).unwrap(), "12345");
        assert!(read_capped(&p, 4).is_err());
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_input(&p).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
        assert_eq!(
            read_input(&dir.path().join("missing")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
