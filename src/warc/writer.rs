//! The WARC files of one crawl (or of one worker of a shared crawl): naming,
//! rotation, appending, cutting back to the durable marks.
//!
//! Files are `legcrawl-<UTC YYYYMMDDHHMMSS>-<serial>.warc.gz` in the WARC
//! directory, the serial (5 digits) counting on from the highest its owner
//! registered there. The writer keeps no marks itself: its owner does — the
//! embedded state (`engine::embedded::archive`) or the shared crawl's Redis
//! (`engine::worker::warc`) — and the protocol is the same for both:
//! - [`WarcWriter::open`] takes the directory's lock (one writer per
//!   directory), cuts every file the owner marked back to its mark and goes on
//!   with the newest unless it is full or gone.
//! - [`WarcWriter::append`] answers [`Appended::NeedsFile`] when no file is
//!   open: the owner registers the new file's path (length 0, durably) before
//!   [`WarcWriter::begin`] creates it and writes the records there, so a file of the crawl is always known
//!   and a file without a mark is never touched. A file opens with a
//!   `warcinfo` record.
//! - [`WarcWriter::mark`] flushes the open file and hands back its length and
//!   the [`WarcSync`] that must run before the owner stores that length with
//!   the completions it covers. Then [`WarcWriter::marked`] (the file is
//!   closed there when past the size limit, so one commit's records are
//!   always in one file), or, when the owner's commit did not take them,
//!   [`WarcWriter::cut_to_mark`].
//!
//! Every write and sync has a crash point (`warc.create`, `warc.append`,
//! `warc.sync`, `warc.truncate`). Depends on `record`, [`crate::crash`],
//! [`crate::dirlock`] and [`crate::fsync`].

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{WarcError, WarcSettings, record};
use crate::crash;

/// The WARC file being written.
struct Current {
    path: PathBuf,
    file: BufWriter<File>,
    /// Bytes written (buffered ones included).
    len: u64,
    /// The length last marked.
    marked: u64,
}

impl Current {
    /// Appends `records`, after the `warcinfo` record when the file is empty
    /// or `describe` (the writer's first records: a new run); returns the
    /// offset they begin at.
    fn write(
        &mut self,
        records: &[u8],
        settings: &WarcSettings,
        describe: bool,
    ) -> Result<u64, WarcError> {
        if self.len == 0 || describe {
            let name = self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let info = record::warcinfo(&name, crate::clock::now(), &settings.info);
            crash::point("warc.append");
            self.file.write_all(&info).map_err(io(&self.path))?;
            self.len += info.len() as u64;
        }
        crash::point("warc.append");
        let at = self.len;
        self.file.write_all(records).map_err(io(&self.path))?;
        self.len += records.len() as u64;
        Ok(at)
    }
}

/// Appends records to a directory's WARC files; see the module doc.
pub struct WarcWriter {
    /// The directory, canonical.
    dir: PathBuf,
    /// The directory's lock, held while the writer lives.
    _lock: File,
    settings: WarcSettings,
    /// The open file; `None` before the first record and after a rotation.
    current: Option<Current>,
    /// Serial of the next new file.
    next_serial: u32,
    /// Files created by this writer.
    created: u64,
    /// A `warcinfo` record of this writer's settings (its run) was written.
    described: bool,
    /// Where in the open file that record is (cut off with it, it is written
    /// again before the next records).
    info_at: u64,
}

/// What [`WarcWriter::append`] did.
#[must_use = "a new file must be registered and begun before the records are written"]
pub enum Appended {
    /// The records are in the file (in its buffer until the next mark), from
    /// this offset on.
    Written(u64),
    /// Nothing was written: no file is open. Register [`NewFile::path`], then
    /// [`WarcWriter::begin`] it with the same records.
    NeedsFile(NewFile),
}

/// The next file's name, to register before [`WarcWriter::begin`] creates it.
pub struct NewFile {
    path: PathBuf,
}

impl NewFile {
    /// The file's path (canonical), to register with length 0.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The open file's length to store as its mark, and the sync that must run
/// first.
pub struct Mark {
    /// The file (canonical path).
    pub path: PathBuf,
    /// Its length: the bytes the mark covers.
    pub len: u64,
    /// Syncs the file up to `len`.
    pub sync: WarcSync,
}

/// The sync of a WARC file up to its mark, run (on any thread) before the
/// mark is stored.
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

/// An I/O error on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WarcError + '_ {
    move |source| WarcError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The canonical path of the WARC directory `dir`, created if missing (its
/// parent must exist): what the owner's marks are kept under.
pub fn canonical_dir(dir: &Path) -> Result<PathBuf, WarcError> {
    crate::fsync::create_dir_all(dir).map_err(io(dir))?;
    dir.canonicalize().map_err(io(dir))
}

impl WarcWriter {
    /// Opens the WARC directory of `settings` (canonical, see
    /// [`canonical_dir`]) with `marks`, the owner's `(file, durable length)`
    /// of the files it registered there: takes the directory's lock, cuts
    /// every file back to its mark, and goes on with the newest one unless it
    /// is full or gone.
    pub fn open(
        settings: WarcSettings,
        marks: Vec<(PathBuf, u64)>,
    ) -> Result<WarcWriter, WarcError> {
        let dir = canonical_dir(&settings.dir)?;
        let lock = crate::dirlock::lock(&dir)
            .map_err(io(&dir))?
            .ok_or_else(|| WarcError::Busy { dir: dir.clone() })?;
        // The newest registered file, and whether it is there.
        let mut newest: Option<(u32, PathBuf, u64, bool)> = None;
        let mut next_serial = 0;
        for (path, mark) in marks {
            let serial = serial_of(&path).unwrap_or(0);
            next_serial = next_serial.max(serial.saturating_add(1));
            let present = cut_back(&path, mark)?;
            if newest.as_ref().is_none_or(|(s, ..)| serial >= *s) {
                newest = Some((serial, path, mark, present));
            }
        }
        // The file the crawl would go on with is gone: say so once (the next
        // run goes on with the new file). An older file moved away (archived,
        // full) is the owner's business; a file registered but never begun
        // held nothing. A new file never takes a registered file's name.
        if let Some((_, path, mark, false)) = &newest
            && *mark > 0
        {
            tracing::warn!(
                "{}: this crawl's WARC file is missing (deleted or moved away?): the records it held ({mark} bytes) are not in the archive directory any more; the crawl goes on with a new file",
                path.display()
            );
        }
        let current = match newest {
            Some((_, path, mark, true)) if mark < settings.max_size => {
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
            _lock: lock,
            settings,
            current,
            next_serial,
            created: 0,
            described: false,
            info_at: 0,
        })
    }

    /// Appends encoded records ([`super::encode`]) to the open file, or asks
    /// for a new one (see [`Appended`]); nothing for an empty slice.
    pub fn append(&mut self, records: &[u8]) -> Result<Appended, WarcError> {
        if records.is_empty() {
            return Ok(Appended::Written(self.written().unwrap_or(0)));
        }
        match self.current.as_mut() {
            Some(current) => {
                let info_at = current.len;
                let at = current.write(records, &self.settings, !self.described)?;
                if !self.described {
                    (self.described, self.info_at) = (true, info_at);
                }
                Ok(Appended::Written(at))
            }
            None => {
                let path = self
                    .dir
                    .join(file_name(crate::clock::now(), self.next_serial));
                Ok(Appended::NeedsFile(NewFile { path }))
            }
        }
    }

    /// Creates `file`, which its owner registered, and appends `records` (those
    /// [`WarcWriter::append`] did not write) to it; returns the offset they
    /// begin at (after the file's `warcinfo` record).
    pub fn begin(&mut self, file: NewFile, records: &[u8]) -> Result<u64, WarcError> {
        let NewFile { path } = file;
        self.next_serial = serial_of(&path)
            .unwrap_or(self.next_serial)
            .saturating_add(1);
        let created = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(io(&path))?;
        // The new name must survive a power cut once records are marked in it.
        crate::fsync::sync_dir(&self.dir).map_err(io(&self.dir))?;
        self.created += 1;
        tracing::info!(file = %path.display(), "WARC file begun");
        let current = self.current.insert(Current {
            path,
            file: BufWriter::with_capacity(256 * 1024, created),
            len: 0,
            marked: 0,
        });
        let at = current.write(records, &self.settings, !self.described)?;
        (self.described, self.info_at) = (true, 0);
        Ok(at)
    }

    /// When records were written since the last mark: flushes them to the
    /// file and returns its length with the sync that must run before the
    /// owner stores it. Then [`WarcWriter::marked`] or
    /// [`WarcWriter::cut_to_mark`].
    pub fn mark(&mut self) -> Result<Option<Mark>, WarcError> {
        let Some(current) = self.current.as_mut() else {
            return Ok(None);
        };
        if current.len == current.marked {
            return Ok(None);
        }
        // crash point: warc.append (the buffered records reach the file)
        current.file.flush().map_err(io(&current.path))?;
        let file = current
            .file
            .get_ref()
            .try_clone()
            .map_err(io(&current.path))?;
        Ok(Some(Mark {
            path: current.path.clone(),
            len: current.len,
            sync: WarcSync {
                file,
                path: current.path.clone(),
            },
        }))
    }

    /// The owner stored `len` (from [`WarcWriter::mark`], or a length
    /// [`WarcWriter::written`] gave before that mark) as the open file's mark.
    /// Then [`WarcWriter::rotate_if_full`].
    pub fn marked(&mut self, len: u64) {
        if let Some(current) = self.current.as_mut() {
            current.marked = len;
        }
    }

    /// Closes the open file once it is past the size limit and all of it is
    /// marked: the next record opens a new one. (A file takes the records of
    /// pages marked together whole, so it may end past the limit by those.)
    pub fn rotate_if_full(&mut self) {
        if self
            .current
            .as_ref()
            .is_some_and(|c| c.marked >= self.settings.max_size && c.len == c.marked)
        {
            self.current = None;
        }
    }

    /// The open file's length with everything appended so far (buffered
    /// bytes included); `None` when no file is open.
    pub fn written(&self) -> Option<u64> {
        self.current.as_ref().map(|c| c.len)
    }

    /// The open file (canonical path); `None` when no file is open.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|c| c.path.as_path())
    }

    /// The owner's commit did not take the records written since the last
    /// mark (a shared crawl's lease had expired): they are cut off the file.
    pub fn cut_to_mark(&mut self) -> Result<(), WarcError> {
        let Some(current) = self.current.as_mut() else {
            return Ok(());
        };
        if current.len == current.marked {
            return Ok(());
        }
        // Buffered bytes reach the file first, so that nothing is written
        // past the cut later; the file is opened for appending.
        current.file.flush().map_err(io(&current.path))?;
        crash::point("warc.truncate");
        current
            .file
            .get_ref()
            .set_len(current.marked)
            .map_err(io(&current.path))?;
        current.len = current.marked;
        if current.marked <= self.info_at {
            self.described = false;
        }
        Ok(())
    }

    /// WARC files this writer created.
    pub fn files_created(&self) -> u64 {
        self.created
    }

    /// The directory the files are in (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Cuts `path` back to `mark` bytes if it is longer; false when it is gone
/// (moved away by its owner: nothing to do). A shorter file is an error.
fn cut_back(path: &Path, mark: u64) -> Result<bool, WarcError> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io(path)(error)),
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
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io(path))?;
        crash::point("warc.truncate");
        file.set_len(mark).map_err(io(path))?;
        file.sync_all().map_err(io(path))?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::Exchange;
    use crate::warc::Capture;
    use std::collections::BTreeMap;

    /// An owner keeping the marks in memory, as the state or Redis would.
    #[derive(Default)]
    struct Owner {
        marks: BTreeMap<PathBuf, u64>,
    }

    impl Owner {
        fn open(&self, settings: &WarcSettings) -> WarcWriter {
            let marks = self.marks.iter().map(|(p, l)| (p.clone(), *l)).collect();
            WarcWriter::open(settings.clone(), marks).unwrap()
        }

        fn append(&mut self, writer: &mut WarcWriter, url: &str) {
            let records = record::capture(&capture(url)).0;
            if let Appended::NeedsFile(new) = writer.append(&records).unwrap() {
                self.marks.insert(new.path().to_owned(), 0);
                writer.begin(new, &records).unwrap();
            }
        }

        /// Marks and commits what was written.
        fn commit(&mut self, writer: &mut WarcWriter) {
            let mark = writer.mark().unwrap().unwrap();
            mark.sync.run().unwrap();
            self.marks.insert(mark.path, mark.len);
            writer.marked(mark.len);
            writer.rotate_if_full();
        }
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
                date: crate::clock::now(),
            },
            revisit: None,
        }
    }

    fn settings(dir: &Path) -> WarcSettings {
        WarcSettings {
            dir: dir.join("warc"),
            max_size: 1 << 30,
            info: vec![("software".into(), "test".into())],
        }
    }

    fn text(file: &Path) -> String {
        use std::io::Read;
        let bytes = std::fs::read(file).unwrap();
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn records_past_the_durable_mark_are_cut_on_open_and_the_file_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = settings(tmp.path());
        let mut owner = Owner::default();
        let mut writer = owner.open(&settings);
        owner.append(&mut writer, "http://a/1");
        owner.commit(&mut writer);
        assert!(writer.mark().unwrap().is_none(), "nothing new");
        let file = owner.marks.keys().next().unwrap().clone();
        let durable = std::fs::metadata(&file).unwrap().len();
        // A second commit that never lands (a kill before it).
        owner.append(&mut writer, "http://a/2");
        writer.mark().unwrap().unwrap().sync.run().unwrap();
        assert!(std::fs::metadata(&file).unwrap().len() > durable);
        drop(writer);
        let mut writer = owner.open(&settings);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), durable);
        // The run goes on in the same file, after its durable records.
        owner.append(&mut writer, "http://a/3");
        owner.commit(&mut writer);
        assert_eq!(writer.files_created(), 0);
        let text = text(&file);
        // The file's, then the second writer's (its run's) before its records.
        assert_eq!(text.matches("WARC-Type: warcinfo").count(), 2);
        assert!(text.find("WARC-Type: warcinfo").unwrap() < text.find("http://a/1").unwrap());
        assert!(text.rfind("WARC-Type: warcinfo").unwrap() < text.find("http://a/3").unwrap());
        assert!(text.contains("http://a/1") && text.contains("http://a/3"));
        assert!(
            !text.contains("http://a/2"),
            "the lost commit's records are gone"
        );
    }

    #[test]
    fn records_a_commit_did_not_take_are_cut_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = settings(tmp.path());
        let mut owner = Owner::default();
        let mut writer = owner.open(&settings);
        // Refused in a new file: the file is emptied, and begins again with
        // its warcinfo record.
        owner.append(&mut writer, "http://a/refused-first");
        writer.mark().unwrap().unwrap().sync.run().unwrap();
        writer.cut_to_mark().unwrap();
        let file = owner.marks.keys().next().unwrap().clone();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
        owner.append(&mut writer, "http://a/1");
        owner.commit(&mut writer);
        // Refused after a commit, its records still buffered.
        owner.append(&mut writer, "http://a/refused");
        writer.cut_to_mark().unwrap();
        owner.append(&mut writer, "http://a/2");
        owner.commit(&mut writer);
        drop(writer);
        let text = text(&file);
        assert_eq!(text.matches("WARC-Type: warcinfo").count(), 1);
        assert!(text.contains("http://a/1") && text.contains("http://a/2"));
        assert!(!text.contains("refused"), "{text}");
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            owner.marks[&file],
            "the file ends at its mark"
        );
    }

    #[test]
    fn a_shorter_file_than_its_mark_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = settings(tmp.path());
        let mut owner = Owner::default();
        let mut writer = owner.open(&settings);
        owner.append(&mut writer, "http://a/1");
        owner.commit(&mut writer);
        let file = owner.marks.keys().next().unwrap().clone();
        drop(writer);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(10)
            .unwrap();
        let marks: Vec<_> = owner.marks.iter().map(|(p, l)| (p.clone(), *l)).collect();
        let error = WarcWriter::open(settings.clone(), marks)
            .err()
            .expect("refused");
        assert!(
            matches!(error, WarcError::Shorter { len: 10, .. }),
            "{error}"
        );
        // Moved away: a new file is begun.
        std::fs::remove_file(&file).unwrap();
        let mut writer = owner.open(&settings);
        owner.append(&mut writer, "http://a/2");
        assert_eq!(writer.files_created(), 1);
    }

    #[test]
    fn one_writer_per_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = settings(tmp.path());
        let owner = Owner::default();
        let writer = owner.open(&settings);
        let error = WarcWriter::open(settings.clone(), Vec::new())
            .err()
            .expect("refused while the first writer lives");
        assert!(matches!(error, WarcError::Busy { .. }), "{error}");
        drop(writer);
        let _writer = owner.open(&settings);
    }

    #[test]
    fn names_carry_the_time_and_serial() {
        let name = file_name(std::time::UNIX_EPOCH, 7);
        assert_eq!(name, "legcrawl-19700101000000-00007.warc.gz");
        assert_eq!(serial_of(Path::new(&name)), Some(7));
        assert_eq!(serial_of(Path::new("other.warc.gz")), None);
    }
}
