//! The WARC files of one crawl: naming, rotation, appending, marks, cutting back.
//!
//! Files are `legcrawl-<UTC YYYYMMDDHHMMSS>-<serial>.warc.gz` in the WARC
//! directory, the serial (5 digits) counting on from the highest this state
//! registered there. A file is registered in the state (length 0, synced)
//! before it is created, and opens with a `warcinfo` record. [`WarcWriter::seal`]
//! flushes the open file, puts its length into the open commit group
//! (`State::mark_warc`) and hands back the [`WarcSync`] that the group's flush
//! runs before applying the batch; past the size limit the file is closed
//! there, at a group boundary, so a group's records are always in one file.
//! [`WarcWriter::open`] cuts every registered file back to its mark. Files this
//! state did not register are never touched. Every write and sync has a crash
//! point (`warc.create`, `warc.append`, `warc.sync`, `warc.truncate`).
//! Depends on `record`, [`crate::store`] and [`crate::clock`].

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Capture, WarcError, WarcSettings, record};
use crate::fetch::Exchange;
use crate::store::{State, crash};

/// The WARC file being written.
struct Current {
    path: PathBuf,
    file: BufWriter<File>,
    /// Bytes written (buffered ones included).
    len: u64,
    /// The length last put into a commit group.
    marked: u64,
}

/// Appends records to the crawl's WARC files; see the module doc.
pub struct WarcWriter {
    /// The directory, canonical.
    dir: PathBuf,
    settings: WarcSettings,
    /// The open file; `None` before the first record and after a rotation.
    current: Option<Current>,
    /// Serial of the next new file.
    next_serial: u32,
    /// Files created by this writer.
    created: u64,
}

/// The sync of a WARC file up to its mark, run by the group's flush (on any
/// thread) before the batch holding the mark is applied.
#[must_use = "the mark is durable only after the file is synced"]
pub struct WarcSync {
    file: File,
    path: PathBuf,
}

impl WarcSync {
    /// Syncs the file's data to disk.
    pub fn run(self) -> Result<(), WarcError> {
        crash::point("warc.sync");
        self.file.sync_data().map_err(|source| WarcError::Io {
            path: self.path,
            source,
        })
    }
}

/// `legcrawl-<timestamp>-<serial>.warc.gz` for a file begun at `time`.
pub fn file_name(time: SystemTime, serial: u32) -> String {
    let stamp: String = record::warc_date(time)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    format!("legcrawl-{stamp}-{serial:05}.warc.gz")
}

/// The serial in a name [`file_name`] made.
fn serial_of(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("legcrawl-")?.strip_suffix(".warc.gz")?;
    rest.rsplit_once('-')?.1.parse().ok()
}

impl WarcWriter {
    /// Opens the WARC directory of a crawl on `state`: creates it if missing,
    /// cuts every file this state registered there back to its mark, and goes
    /// on with the newest one unless it is full or gone.
    pub fn open(settings: WarcSettings, state: &mut State) -> Result<WarcWriter, WarcError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| WarcError::Io { path, source }
        };
        crate::fsync::create_dir_all(&settings.dir).map_err(io(&settings.dir))?;
        let dir = settings.dir.canonicalize().map_err(io(&settings.dir))?;
        let marks = state.warc_marks(&dir)?;
        let mut newest: Option<(u32, PathBuf, u64)> = None;
        let mut next_serial = 0;
        for (path, mark) in marks {
            let serial = serial_of(&path).unwrap_or(0);
            next_serial = next_serial.max(serial.saturating_add(1));
            let present = cut_back(&path, mark)?;
            if newest.as_ref().is_none_or(|(s, _, _)| serial >= *s) {
                newest = present.then_some((serial, path, mark));
            }
        }
        let current = match newest {
            Some((_, path, mark)) if mark < settings.max_size => {
                let file = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(io(&path))?;
                Some(Current {
                    path,
                    file: BufWriter::with_capacity(256 * 1024, file),
                    len: mark,
                    marked: mark,
                })
            }
            _ => None,
        };
        Ok(WarcWriter {
            dir,
            settings,
            current,
            next_serial,
            created: 0,
        })
    }

    /// Appends encoded records ([`super::encode`]); nothing for an empty slice.
    pub fn append(&mut self, state: &mut State, records: &[u8]) -> Result<(), WarcError> {
        if records.is_empty() {
            return Ok(());
        }
        self.write(state, records)
    }

    /// Appends plain `request` and `response` records of `exchange` (robots.txt).
    pub fn append_exchange(
        &mut self,
        state: &mut State,
        exchange: Exchange,
    ) -> Result<(), WarcError> {
        let capture = Capture {
            exchange,
            revisit: None,
        };
        self.append(state, &record::capture(&capture))
    }

    /// Puts the open file's length into the open commit group when records were
    /// written since the last mark, and returns the sync the group's flush must
    /// run first. Past the size limit the file is closed: the next record opens
    /// a new one.
    pub fn seal(&mut self, state: &mut State) -> Result<Option<WarcSync>, WarcError> {
        let Some(current) = self.current.as_mut() else {
            return Ok(None);
        };
        if current.len == current.marked {
            return Ok(None);
        }
        let io = |source| WarcError::Io {
            path: current.path.clone(),
            source,
        };
        // crash point: warc.append (the buffered records reach the file)
        current.file.flush().map_err(io)?;
        let file = current.file.get_ref().try_clone().map_err(io)?;
        state.mark_warc(&current.path, current.len);
        current.marked = current.len;
        let sync = WarcSync {
            file,
            path: current.path.clone(),
        };
        if current.len >= self.settings.max_size {
            self.current = None;
        }
        Ok(Some(sync))
    }

    /// WARC files this writer created.
    pub fn files_created(&self) -> u64 {
        self.created
    }

    /// The directory the files are in (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&mut self, state: &mut State, bytes: &[u8]) -> Result<(), WarcError> {
        if self.current.is_none() {
            self.current = Some(self.create(state)?);
        }
        let Some(current) = self.current.as_mut() else {
            unreachable!("a WARC file was just opened");
        };
        if current.len == 0 {
            let name = current
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let info = record::warcinfo(&name, SystemTime::now(), &self.settings.info);
            crash::point("warc.append");
            current
                .file
                .write_all(&info)
                .map_err(|source| WarcError::Io {
                    path: current.path.clone(),
                    source,
                })?;
            current.len += info.len() as u64;
        }
        crash::point("warc.append");
        current
            .file
            .write_all(bytes)
            .map_err(|source| WarcError::Io {
                path: current.path.clone(),
                source,
            })?;
        current.len += bytes.len() as u64;
        Ok(())
    }

    /// Registers and creates the next file.
    fn create(&mut self, state: &mut State) -> Result<Current, WarcError> {
        let path = self
            .dir
            .join(file_name(SystemTime::now(), self.next_serial));
        self.next_serial = self.next_serial.saturating_add(1);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| WarcError::Io { path, source }
        };
        // crash point: warc.create (registered and synced before the file exists)
        state.register_warc(&path)?;
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(io(&path))?;
        // The new name must survive a power cut once records are marked in it.
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(io(&self.dir))?;
        self.created += 1;
        tracing::info!(file = %path.display(), "WARC file begun");
        Ok(Current {
            path,
            file: BufWriter::with_capacity(256 * 1024, file),
            len: 0,
            marked: 0,
        })
    }
}

/// Cuts `path` back to `mark` bytes if it is longer; false when it is gone
/// (moved away by its owner: nothing to do). A shorter file is an error.
fn cut_back(path: &Path, mark: u64) -> Result<bool, WarcError> {
    let io = |source| WarcError::Io {
        path: path.to_owned(),
        source,
    };
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io(error)),
    };
    if len < mark {
        return Err(WarcError::Shorter {
            path: path.to_owned(),
            len,
            mark,
        });
    }
    if len > mark {
        tracing::info!(file = %path.display(), len, mark, "cutting the WARC file back to its durable records");
        let file = OpenOptions::new().write(true).open(path).map_err(io)?;
        crash::point("warc.truncate");
        file.set_len(mark).map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::OpenOptions;

    fn open_state(dir: &Path) -> State {
        let options = OpenOptions {
            create: true,
            bloom_bits: Some(10),
            ..OpenOptions::default()
        };
        State::open(dir, &options).unwrap()
    }

    fn capture(url: &str) -> Capture {
        Capture {
            exchange: Exchange {
                url: url.to_owned(),
                request_head: b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec(),
                request_body: bytes::Bytes::new(),
                response_head: b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
                response_body: bytes::Bytes::from_static(b"hello"),
                truncated: false,
                ip: None,
                date: SystemTime::now(),
            },
            revisit: None,
        }
    }

    #[test]
    fn records_past_the_durable_mark_are_cut_on_open_and_the_file_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = WarcSettings {
            dir: tmp.path().join("warc"),
            max_size: 1 << 30,
            info: vec![("software".into(), "test".into())],
        };
        let mut state = open_state(&tmp.path().join("state"));
        let mut writer = WarcWriter::open(settings.clone(), &mut state).unwrap();
        writer
            .append(&mut state, &record::capture(&capture("http://a/1")))
            .unwrap();
        writer.seal(&mut state).unwrap().unwrap().run().unwrap();
        state.commit().unwrap();
        assert!(writer.seal(&mut state).unwrap().is_none(), "nothing new");
        let file = std::fs::read_dir(writer.dir())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let durable = std::fs::metadata(&file).unwrap().len();
        // A second group whose batch never commits (a kill before its flush).
        writer
            .append(&mut state, &record::capture(&capture("http://a/2")))
            .unwrap();
        writer.seal(&mut state).unwrap().unwrap().run().unwrap();
        assert!(std::fs::metadata(&file).unwrap().len() > durable);
        drop(writer);
        drop(state);
        let mut state = open_state(&tmp.path().join("state"));
        let mut writer = WarcWriter::open(settings, &mut state).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), durable);
        // The run goes on in the same file, after its durable records.
        writer
            .append(&mut state, &record::capture(&capture("http://a/3")))
            .unwrap();
        writer.seal(&mut state).unwrap().unwrap().run().unwrap();
        state.commit().unwrap();
        assert_eq!(writer.files_created(), 0);
        let text: Vec<u8> = {
            use std::io::Read;
            let bytes = std::fs::read(&file).unwrap();
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_end(&mut out)
                .unwrap();
            out
        };
        let text = String::from_utf8_lossy(&text);
        assert_eq!(text.matches("WARC-Type: warcinfo").count(), 1);
        assert!(text.contains("http://a/1") && text.contains("http://a/3"));
        assert!(
            !text.contains("http://a/2"),
            "the lost group's records are gone"
        );
    }

    #[test]
    fn a_shorter_file_than_its_mark_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = WarcSettings {
            dir: tmp.path().join("warc"),
            max_size: 1 << 30,
            info: Vec::new(),
        };
        let mut state = open_state(&tmp.path().join("state"));
        let mut writer = WarcWriter::open(settings.clone(), &mut state).unwrap();
        writer
            .append(&mut state, &record::capture(&capture("http://a/1")))
            .unwrap();
        writer.seal(&mut state).unwrap().unwrap().run().unwrap();
        state.commit().unwrap();
        let file = std::fs::read_dir(writer.dir())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        drop(writer);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(10)
            .unwrap();
        let error = WarcWriter::open(settings.clone(), &mut state)
            .err()
            .expect("refused");
        assert!(
            matches!(error, WarcError::Shorter { len: 10, .. }),
            "{error}"
        );
        // Moved away: a new file is begun.
        std::fs::remove_file(&file).unwrap();
        let mut writer = WarcWriter::open(settings, &mut state).unwrap();
        writer
            .append(&mut state, &record::capture(&capture("http://a/2")))
            .unwrap();
        assert_eq!(writer.files_created(), 1);
    }

    #[test]
    fn names_carry_the_time_and_serial() {
        let name = file_name(std::time::UNIX_EPOCH, 7);
        assert_eq!(name, "legcrawl-19700101000000-00007.warc.gz");
        assert_eq!(serial_of(Path::new(&name)), Some(7));
        assert_eq!(serial_of(Path::new("other.warc.gz")), None);
    }
}
