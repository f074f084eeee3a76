//! Writing output files without ever losing what was there.
//!
//! Every file the lab writes goes to a temporary file in the same
//! directory and is renamed over its destination only once it is complete
//! and on disk. A command that fails, or is interrupted, leaves the
//! destination exactly as it was (a trace recorded yesterday, a results
//! file); the rename is atomic, so a reader sees the old file or the whole
//! new one. A destination that exists and is not a regular file (a
//! symbolic link, a device such as `/dev/null`, a directory) is refused
//! before anything runs: renaming over it would replace the link or the
//! device node itself.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a file could not be written: one line naming the path and the
/// cause, ready to print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WriteError(pub String);

/// A file being written to a temporary path beside `dest`; see the module
/// docs. Dropping it without [`commit`](OutputFile::commit) removes the
/// temporary file and leaves `dest` untouched.
#[derive(Debug)]
pub struct OutputFile {
    dest: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl OutputFile {
    /// Checks that `dest` may be written (absent, or a regular file) and
    /// creates the temporary file beside it, so a path that cannot be
    /// written fails here, before any work is done.
    pub fn create(dest: &Path) -> Result<OutputFile, WriteError> {
        let err = |what: String| WriteError(format!("{}: {what}", dest.display()));
        match fs::symlink_metadata(dest) {
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(err(format!(
                    "exists and is not a regular file ({}); refusing to replace it",
                    kind(&meta.file_type())
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(format!("cannot inspect: {e}"))),
        }
        let name = dest
            .file_name()
            .ok_or_else(|| err("names no file".into()))?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".vmbench-{}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| err(format!("cannot write in {}: {e}", dir.display())))?;
        Ok(OutputFile {
            dest: dest.to_path_buf(),
            tmp,
            file: Some(file),
        })
    }

    /// Appends `bytes` to the temporary file.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let result = match self.file.as_mut() {
            Some(file) => file.write_all(bytes),
            None => return Err(self.error("already committed")),
        };
        result.map_err(|e| self.error(&format!("writing: {e}")))
    }

    /// Makes the file durable and renames it over the destination.
    pub fn commit(mut self) -> Result<(), WriteError> {
        let file = self
            .file
            .take()
            .ok_or_else(|| self.error("already committed"))?;
        file.sync_all()
            .map_err(|e| self.error(&format!("writing: {e}")))?;
        drop(file);
        fs::rename(&self.tmp, &self.dest)
            .map_err(|e| self.error(&format!("renaming into place: {e}")))
    }

    fn error(&self, what: &str) -> WriteError {
        WriteError(format!("{}: {what}", self.dest.display()))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // Not committed: the destination keeps what it had.
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `text` to `dest` through an [`OutputFile`].
pub fn write_file(dest: &Path, text: &str) -> Result<(), WriteError> {
    let mut out = OutputFile::create(dest)?;
    out.write_all(text.as_bytes())?;
    out.commit()
}

fn kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory, removed with what is in it when dropped.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("vmbench-output-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn an_uncommitted_file_leaves_the_old_one_intact() {
        let scratch = scratch("uncommitted");
        let dir = scratch.path();
        let dest = dir.join("trace.json");
        fs::write(&dest, b"yesterday's trace").unwrap();
        {
            let mut out = OutputFile::create(&dest).unwrap();
            out.write_all(b"half").unwrap();
            // dropped: the command failed
        }
        assert_eq!(fs::read(&dest).unwrap(), b"yesterday's trace");
        assert_eq!(
            fs::read_dir(dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        write_file(&dest, "new").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir).unwrap().count(), 1);
    }

    #[test]
    fn links_devices_and_directories_are_refused_untouched() {
        let scratch = scratch("special");
        let dir = scratch.path();
        let target = dir.join("target");
        fs::write(&target, b"keep").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = OutputFile::create(&link).unwrap_err();
        assert!(e.0.contains("symbolic link"), "{e}");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let e = OutputFile::create(Path::new("/dev/null")).unwrap_err();
        assert!(e.0.contains("a device"), "{e}");
        let e = OutputFile::create(dir).unwrap_err();
        assert!(e.0.contains("a directory"), "{e}");
    }

    #[test]
    fn an_unwritable_place_fails_before_any_work() {
        let e = OutputFile::create(Path::new("/nonexistent-dir/x.json")).unwrap_err();
        assert!(e.0.contains("cannot write in /nonexistent-dir"), "{e}");
    }
}
