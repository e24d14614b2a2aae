//! A watched configuration file (feature `file`): a YARP document whose changes reload
//! the engine's whole configuration, as [`Engine::load_json_from`] does — destinations diffed
//! by id with the identity rules, so a surviving destination keeps its health and in-flight
//! count.
//!
//! - **The directory is watched, not the file.** Editors save by writing a temporary file and
//!   renaming it over the old one, and a Kubernetes ConfigMap volume swaps a `..data` symlink
//!   (`dir/config.json -> ..data/config.json`, updated by renaming a new `..data_tmp` over
//!   `..data`): a watch on the file itself would follow the old inode and miss both. After each
//!   burst of changes in the directory, once it has been quiet for the debounce delay, the file
//!   is read again **by its path** and reloaded only when its bytes differ from the last ones
//!   read.
//! - **A bad version keeps the configuration in force.** A document that does not parse or
//!   does not validate (an empty or half-written file among them), or a file that cannot be read
//!   (deleted, permission denied, not UTF-8), changes nothing: it is a
//!   [`ConfigRejected`](crate::HealthEventKind::ConfigRejected) event whose origin is the path,
//!   a log line (error for a rejected document, warning for an unreadable file), and the
//!   status's [`config.last_error`](crate::ConfigStatus::last_error) until a good version is
//!   loaded. The next change of the file is read as usual: the watch recovers by itself.
//! - **The first load happens in [`ConfigFile::watch`]**, before it returns: by default a file
//!   that cannot be loaded then is an error and nothing is watched
//!   ([`require_first_load(false)`](ConfigFile::require_first_load) watches anyway and keeps
//!   what the engine has until the file is good).
//!
//! Reloads run on a thread of the watch's own, not on an async runtime; dropping the
//! [`FileWatch`] stops watching and waits for a reload in progress to finish.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{new_debouncer, DebounceEventResult, Debouncer};

use crate::config::diagnostics::{ConfigError, Diagnostic};
use crate::engine::Engine;

/// How long the directory must be quiet before the file is read again, unless
/// [`ConfigFile::debounce`] says otherwise: 250 ms.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(250);

/// A YARP configuration file to load and watch: what [`watch`](Self::watch) starts.
///
/// ```
/// use healthpick::discovery::ConfigFile;
/// use healthpick::Engine;
///
/// # let dir = std::env::temp_dir().join(format!("healthpick-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("appsettings.json");
/// std::fs::write(&path, r#"{"ReverseProxy": {"Clusters": {"payments": {
///     "Destinations": {"eu-1": {"Address": "http://127.0.0.1:8001/"}}}}}}"#)?;
///
/// let engine = Engine::default();
/// let watch = ConfigFile::new(&path).watch(&engine)?; // loaded before `watch` returns
/// assert_eq!(engine.pick_endpoint("payments")?.destination().id(), "eu-1");
/// assert_eq!(engine.status().config.origin, Some(path.display().to_string()));
/// // From now on, every change of the file reloads the engine; dropping `watch` stops it.
/// drop(watch);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    debounce: Duration,
    require_first_load: bool,
}

impl ConfigFile {
    /// The file at `path`. The path is kept as given (not resolved through symlinks), so a
    /// ConfigMap's swapped `..data` link is followed anew at every read.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ConfigFile {
            path: path.into(),
            debounce: DEFAULT_DEBOUNCE,
            require_first_load: true,
        }
    }

    /// How long the directory must be quiet after a change before the file is read again
    /// (default [`DEFAULT_DEBOUNCE`]). A save is several file-system operations; waiting for
    /// them to end reads the result once instead of its intermediate states.
    pub fn debounce(mut self, delay: Duration) -> Self {
        self.debounce = delay;
        self
    }

    /// Whether [`watch`](Self::watch) fails when the file cannot be loaded at first (default
    /// `true`). With `false`, it watches anyway: the failure is reported as a later one would be
    /// (event, log line, status) and [`FileWatch::first_load`] returns it, the engine keeps what
    /// it has, and the first good version of the file is loaded.
    pub fn require_first_load(mut self, required: bool) -> Self {
        self.require_first_load = required;
        self
    }

    /// Starts watching the file's directory, then loads the file into `engine` before
    /// returning; from then on every change of the file reloads it, until the returned handle
    /// is dropped.
    ///
    /// # Errors
    /// [`FileError::Watch`] when the directory cannot be watched (it does not exist, or the
    /// system's watch limit is reached); with [`require_first_load`](Self::require_first_load)
    /// (the default), [`FileError::Unreadable`] or [`FileError::Rejected`] when the first load
    /// fails — nothing is watched then.
    pub fn watch(self, engine: &Engine) -> Result<FileWatch, FileError> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let watch_error = |reason: String| FileError::Watch {
            path: dir.clone(),
            reason,
        };
        let (signals, received) = mpsc::channel();
        let events = signals.clone();
        // The debouncer's thread only passes signals on; the reloads run on the watch's own
        // thread, which dropping the handle stops and joins.
        let mut debouncer = new_debouncer(self.debounce, move |result: DebounceEventResult| {
            let _ = events.send(match result {
                Ok(_) => Signal::Changed,
                Err(e) => Signal::WatchFailed(e.to_string()),
            });
        })
        .map_err(|e| watch_error(e.to_string()))?;
        // Watched before the first read, so no change after it is missed.
        debouncer
            .watcher()
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| watch_error(e.to_string()))?;
        let mut reloader = Reloader {
            engine: engine.clone(),
            origin: self.path.display().to_string(),
            path: self.path.clone(),
            seen: Seen::Nothing,
        };
        let first_load = reloader.check().unwrap_or_else(|| Ok(Vec::new()));
        if self.require_first_load {
            if let Err(e) = first_load {
                return Err(e);
            }
        }
        let worker = thread::Builder::new()
            .name("healthpick-config-file".into())
            .spawn(move || reloader.run(&received))
            .map_err(|e| watch_error(e.to_string()))?;
        Ok(FileWatch {
            path: self.path,
            first_load,
            debouncer: Some(debouncer),
            signals,
            worker: Some(worker),
        })
    }
}

/// A running watch of a configuration file ([`ConfigFile::watch`]). Dropping it (or
/// [`stop`](Self::stop)) stops watching and waits for a reload in progress to finish; the
/// configuration in force stays.
#[must_use = "the file is no longer watched when this handle is dropped"]
pub struct FileWatch {
    path: PathBuf,
    first_load: Result<Vec<Diagnostic>, FileError>,
    debouncer: Option<Debouncer<RecommendedWatcher>>,
    signals: mpsc::Sender<Signal>,
    worker: Option<thread::JoinHandle<()>>,
}

impl FileWatch {
    /// The watched file, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the load in [`ConfigFile::watch`] went: its warnings, or (when the first load was
    /// not required) why it failed.
    pub fn first_load(&self) -> Result<&[Diagnostic], &FileError> {
        self.first_load.as_deref()
    }

    /// Stops watching and waits until a reload in progress has finished.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // No more signals from the file system, then the worker ends at its next one.
        self.debouncer.take();
        let _ = self.signals.send(Signal::Stop);
        if let Some(worker) = self.worker.take() {
            // An observer dropping the watch from within a reload must not wait for itself.
            if worker.thread().id() != thread::current().id() {
                let _ = worker.join();
            }
        }
    }
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWatch")
            .field("path", &self.path)
            .field("first_load", &self.first_load)
            .field("running", &self.worker.is_some())
            .finish()
    }
}

/// Why a configuration file was not loaded. The configuration in force stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be read: missing (perhaps between the steps of a swap), permission
    /// denied, a directory, or not UTF-8 text.
    #[error("cannot read `{}`: {reason}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The kind of I/O error (`InvalidData` for a file that is not UTF-8 text).
        kind: io::ErrorKind,
        /// What went wrong.
        reason: String,
    },
    /// The document was read and refused: it does not parse or is not a valid configuration.
    #[error("`{}`: {error}", path.display())]
    Rejected {
        /// The file.
        path: PathBuf,
        /// Every problem of the document.
        error: ConfigError,
    },
    /// The file's directory could not be watched.
    #[error("cannot watch `{}`: {reason}", path.display())]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// What the watch's thread is told.
enum Signal {
    /// Something changed in the directory and it has been quiet since.
    Changed,
    /// The file-system watcher reported an error (events may have been lost).
    WatchFailed(String),
    /// The handle was dropped.
    Stop,
}

/// What the last read of the file found.
enum Seen {
    Nothing,
    Content(Vec<u8>),
    Unreadable(io::ErrorKind),
}

/// Reads the file and loads it into the engine when it changed.
struct Reloader {
    engine: Engine,
    path: PathBuf,
    origin: String,
    seen: Seen,
}

impl Reloader {
    /// Until the handle stops it: every batch of signals is one read of the file.
    fn run(mut self, signals: &mpsc::Receiver<Signal>) {
        while let Ok(first) = signals.recv() {
            for signal in std::iter::once(first).chain(signals.try_iter()) {
                match signal {
                    Signal::Stop => return,
                    Signal::WatchFailed(why) => {
                        tracing::warn!(target: "healthpick", origin = %self.origin, "watching the configuration file's directory: {why}; reading the file again");
                    }
                    Signal::Changed => {}
                }
            }
            let _ = self.check();
        }
    }

    /// Reads the file and loads it if it is not what was read last time (`None`: unchanged).
    fn check(&mut self) -> Option<Result<Vec<Diagnostic>, FileError>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => {
                if matches!(&self.seen, Seen::Content(seen) if *seen == bytes) {
                    return None;
                }
                let loaded = self.load(&bytes);
                self.seen = Seen::Content(bytes);
                Some(loaded)
            }
            Err(e) => {
                let kind = e.kind();
                if matches!(self.seen, Seen::Unreadable(seen) if seen == kind) {
                    return None;
                }
                self.seen = Seen::Unreadable(kind);
                Some(Err(self.unreadable(kind, e.to_string())))
            }
        }
    }

    /// Loads the bytes read: the engine reports a refused document itself.
    fn load(&self, bytes: &[u8]) -> Result<Vec<Diagnostic>, FileError> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            self.unreadable(
                io::ErrorKind::InvalidData,
                format!(
                    "the file is not UTF-8 text (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            )
        })?;
        self.engine
            .load_json_from(&self.origin, text)
            .map_err(|error| FileError::Rejected {
                path: self.path.clone(),
                error,
            })
    }

    /// Reports a file that cannot be read or decoded: a log line, the event and the status.
    fn unreadable(&self, kind: io::ErrorKind, reason: String) -> FileError {
        let error = FileError::Unreadable {
            path: self.path.clone(),
            kind,
            reason,
        };
        tracing::warn!(target: "healthpick", origin = %self.origin, "{error}; the configuration in force stays");
        self.engine
            .refused(Some(&self.origin), vec![error.to_string()]);
        error
    }
}
