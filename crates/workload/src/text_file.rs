//! Reading a text file that is parsed whole (a program file here, the engine's `--options` and
//! `--params` documents) up to a bound, so that a wrong path (`/dev/zero`, a log of gigabytes, a
//! pipe that never ends) ends in an error naming the bound instead of taking the machine's memory.

use std::io::{self, Read};

/// The most read of one such file: a program file or an option document takes kilobytes.
pub const MAX_TEXT_FILE_BYTES: u64 = 64 << 20;

/// The UTF-8 text of `reader`, refused with [`io::ErrorKind::FileTooLarge`] past `limit` bytes.
pub fn read_bounded(reader: impl Read, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    reader.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("more than {} MiB, the most read of a file parsed whole", limit >> 20),
        ));
    }
    Ok(text)
}

/// The UTF-8 text of the file at `path`, up to [`MAX_TEXT_FILE_BYTES`].
pub fn read_text(path: &std::path::Path) -> io::Result<String> {
    read_bounded(std::fs::File::open(path)?, MAX_TEXT_FILE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_up_to_the_limit_is_read_and_one_byte_more_is_refused() {
        assert_eq!(read_bounded(&b"abcd"[..], 4).unwrap(), "abcd");
        let e = read_bounded(&b"abcde"[..], 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
    }

    #[test]
    fn an_endless_file_stops_at_the_limit() {
        let e = read_bounded(std::fs::File::open("/dev/zero").unwrap(), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "more than 1 MiB, the most read of a file parsed whole");
    }

    #[test]
    fn invalid_utf8_is_an_error_of_its_own() {
        let e = read_bounded(&b"\xff\xfe"[..], 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
