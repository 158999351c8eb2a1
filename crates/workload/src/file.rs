//! `/file?size=N`: read N bytes of a file (disk or page-cache I/O on the request path).
//!
//! The file is created once per process, in a fresh directory under the system temp dir, with
//! [`FILE_MAX_SIZE`] bytes of the echo pattern (byte i = `b'a' + i % 26`, checkable by a
//! client), and unlinked at once: the open descriptor keeps it alive, and nothing is left
//! behind when the server is killed. `archlab-engine serve` creates it at start
//! ([`prepare`]); otherwise the first `/file` request does. A request reads with ordinary
//! buffered I/O (through the page cache, no O_DIRECT, no mmap, no sendfile): `pread` calls of
//! at most 64 KiB from offset 0 into the response body, on the calling thread. After the
//! first request the file is in the page cache, so the cost is the copies and the system calls
//! (a warm static-file server), not the disk.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// Largest `/file?size=` and the size of the file: 16 MiB.
pub const FILE_MAX_SIZE: u64 = 16 * 1024 * 1024;
/// Bytes per `pread`.
const CHUNK: usize = 64 * 1024;

static FILE: OnceLock<Result<File, String>> = OnceLock::new();

fn create() -> io::Result<File> {
    let dir = std::env::temp_dir().join(format!("archlab-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("data");
    let mut file = File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
    let mut block = vec![0u8; CHUNK];
    block.iter_mut().enumerate().for_each(|(i, b)| *b = b'a' + (i % 26) as u8);
    let mut written = 0u64;
    while written < FILE_MAX_SIZE {
        // CHUNK is a multiple of 26 (64 KiB is not: restart the pattern from the offset).
        let start = (written % 26) as usize;
        let n = (FILE_MAX_SIZE - written).min((CHUNK - 26) as u64) as usize;
        file.write_all(&block[start..start + n])?;
        written += n as u64;
    }
    file.sync_all()?;
    std::fs::remove_file(&path)?;
    let _ = std::fs::remove_dir(&dir);
    Ok(file)
}

/// Create the file (once per process); the error names the directory.
pub fn prepare() -> Result<(), String> {
    FILE.get_or_init(|| {
        create().map_err(|e| format!("cannot create the /file workload's file under {:?}: {e}", std::env::temp_dir()))
    })
    .as_ref()
    .map(|_| ())
    .map_err(Clone::clone)
}

/// Append the first `size` bytes of the file.
pub(crate) fn run(size: usize, out: &mut Vec<u8>) -> Result<(), String> {
    read_part(0, size, out)
}

/// Append `len` bytes of the file from byte `offset` (a body produced in parts).
pub(crate) fn read_part(offset: usize, len: usize, out: &mut Vec<u8>) -> Result<(), String> {
    prepare()?;
    let file = FILE.get().and_then(|f| f.as_ref().ok()).expect("prepared");
    let start = out.len();
    out.resize(start + len, 0);
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK);
        match file.read_at(&mut out[start + done..start + done + n], (offset + done) as u64) {
            Ok(0) => {
                out.truncate(start);
                return Err("the file ended early".into());
            }
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                out.truncate(start);
                return Err(format!("read failed: {e}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_pattern() {
        let mut out = b">".to_vec();
        super::run(200_000, &mut out).unwrap();
        assert_eq!(out.len(), 200_001);
        assert!(out[1..].iter().enumerate().all(|(i, &b)| b == b'a' + (i % 26) as u8));
        let mut all = Vec::new();
        super::run(super::FILE_MAX_SIZE as usize, &mut all).unwrap();
        assert!(all.iter().enumerate().all(|(i, &b)| b == b'a' + (i % 26) as u8));
    }
}
