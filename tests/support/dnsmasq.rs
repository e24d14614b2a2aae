//! A real dnsmasq for the DNS discovery tests (and the DNS bench): one private instance per
//! test, on a free loopback port, answering the `test` domain from local data only.
//!
//! - A/AAAA records come from a hosts directory dnsmasq watches (inotify): [`Dnsmasq::write_hosts`]
//!   writes a dotfile next to the file and renames it into place, so dnsmasq never reads half a
//!   file and never loads the temporary file (it ignores dotfiles; a non-dot temporary file that
//!   is renamed away leaves its records behind until a SIGHUP).
//! - SRV records come from the configuration, which dnsmasq reads once: [`Dnsmasq::restart`]
//!   starts it again on the same port with new ones (about 10 ms).
//! - Outages: [`Dnsmasq::pause`] stops the whole process group (dnsmasq forks a child per TCP
//!   connection), so nothing answers and clients time out; [`Dnsmasq::stop`] ends it. A
//!   [`Mode::ServfailProxy`] instance forwards to another one and validates DNSSEC against a bogus
//!   root trust anchor, so every answer is SERVFAIL.
//! - dnsmasq runs in the foreground, in its own process group, without a pid file, with
//!   `--user=root` when we are root (else it drops to `nobody` and cannot read our temporary
//!   directory), and with a parent-death signal; dropping the handle kills the whole group and
//!   removes the directory (`KEEP_DNSMASQ_DIR=1` keeps it).
//!
//! Without a dnsmasq binary, [`Dnsmasq::start`] returns `None` after printing that the test is
//! skipped — unless the environment variable `CI` is set, when it panics: a missing install step
//! must not turn CI green.

#![allow(dead_code)] // each test crate uses part of it

use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One SRV record as dnsmasq's `srv-host` takes it.
#[derive(Clone, Debug)]
pub struct Srv {
    /// `_http._tcp.svc.test`
    pub name: String,
    pub target: String,
    pub port: u16,
    pub priority: u16,
    pub weight: u16,
}

impl Srv {
    pub fn new(name: &str, target: &str, port: u16, priority: u16, weight: u16) -> Srv {
        Srv {
            name: name.into(),
            target: target.into(),
            port,
            priority,
            weight,
        }
    }
}

/// What an instance serves.
#[derive(Clone, Debug)]
pub enum Mode {
    /// The `test` domain from the hosts directory and these SRV records, every answer with TTL
    /// `ttl`, plus `extra` configuration lines (`server=/ext/127.0.0.1#PORT`, `txt-record=...`).
    Local {
        ttl: u32,
        srv: Vec<Srv>,
        extra: Vec<String>,
    },
    /// Forwards everything to `127.0.0.1#upstream` and answers SERVFAIL (DNSSEC bogus).
    ServfailProxy { upstream: u16 },
}

impl Mode {
    /// The `test` domain from the hosts directory only, TTL `ttl`.
    pub fn hosts(ttl: u32) -> Mode {
        Mode::Local {
            ttl,
            srv: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// The `test` domain with these SRV records, TTL `ttl`.
    pub fn srv(ttl: u32, srv: Vec<Srv>) -> Mode {
        Mode::Local {
            ttl,
            srv,
            extra: Vec::new(),
        }
    }

    /// Adds configuration lines to a [`Mode::Local`].
    pub fn with(mut self, line: impl Into<String>) -> Mode {
        if let Mode::Local { extra, .. } = &mut self {
            extra.push(line.into());
        }
        self
    }
}

/// A running dnsmasq.
pub struct Dnsmasq {
    dir: PathBuf,
    port: u16,
    binary: PathBuf,
    child: Option<Child>,
    owns_dir: bool,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The dnsmasq binary: `$DNSMASQ` if set (a path that does not exist counts as not installed,
/// which is how the skip and CI paths can be tried), else the first `dnsmasq` on the `PATH`,
/// `/usr/sbin` or `/sbin`.
pub fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("DNSMASQ") {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("dnsmasq"))
        .find(|candidate| candidate.is_file())
}

/// A port free for both UDP and TCP on 127.0.0.1 right now (racy by nature: `start` retries).
pub fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let port = udp.local_addr().expect("local addr").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl Dnsmasq {
    /// Starts an instance, or returns `None` (test skipped) when dnsmasq is not installed and `CI`
    /// is not set.
    ///
    /// # Panics
    /// dnsmasq is missing and `CI` is set; dnsmasq does not start.
    pub fn start(mode: Mode) -> Option<Dnsmasq> {
        let Some(binary) = binary() else {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "dnsmasq is not installed but CI is set: the DNS tests need dnsmasq-base \
                     (.ci/run installs it: apt-get install -y --no-install-recommends dnsmasq-base)"
                );
            }
            eprintln!(
                "skipped: dnsmasq is not installed (apt-get install dnsmasq-base); \
                 with CI set this test fails instead"
            );
            return None;
        };
        let mut last = None;
        for _ in 0..5 {
            match Dnsmasq::start_on(&binary, free_port(), mode.clone(), None) {
                Ok(d) => return Some(d),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => panic!("dnsmasq did not start: {e}"),
            }
        }
        panic!("dnsmasq found no free port: {last:?}");
    }

    fn start_on(binary: &Path, port: u16, mode: Mode, dir: Option<PathBuf>) -> io::Result<Dnsmasq> {
        let owns_dir = dir.is_none();
        let dir = match dir {
            Some(d) => d,
            None => {
                let d = std::env::temp_dir().join(format!(
                    "healthpick-dnsmasq-{}-{}",
                    std::process::id(),
                    SEQ.fetch_add(1, Ordering::Relaxed)
                ));
                let _ = fs::remove_dir_all(&d);
                fs::create_dir_all(d.join("hosts.d"))?;
                d
            }
        };
        let mut conf = String::new();
        match &mode {
            Mode::Local { ttl, srv, extra } => {
                conf.push_str("local=/test/\n");
                conf.push_str(&format!("hostsdir={}\n", dir.join("hosts.d").display()));
                conf.push_str(&format!("local-ttl={ttl}\n"));
                for s in srv {
                    // dnsmasq's order: target, port, priority, weight.
                    conf.push_str(&format!(
                        "srv-host={},{},{},{},{}\n",
                        s.name, s.target, s.port, s.priority, s.weight
                    ));
                }
                for line in extra {
                    conf.push_str(line);
                    conf.push('\n');
                }
            }
            Mode::ServfailProxy { upstream } => {
                conf.push_str("dnssec\n");
                conf.push_str(
                    "trust-anchor=.,12345,8,2,\
                     0000000000000000000000000000000000000000000000000000000000000000\n",
                );
                conf.push_str(&format!("server=127.0.0.1#{upstream}\n"));
            }
        }
        fs::write(dir.join("dnsmasq.conf"), conf)?;
        let log = dir.join("dnsmasq.log");
        let logfile = fs::File::create(&log)?;
        let mut cmd = Command::new(binary);
        cmd.arg("--keep-in-foreground")
            .arg(format!(
                "--conf-file={}",
                dir.join("dnsmasq.conf").display()
            ))
            .arg("--no-resolv")
            .arg("--no-poll")
            .arg("--no-hosts")
            .arg("--listen-address=127.0.0.1")
            .arg("--bind-interfaces")
            .arg(format!("--port={port}"))
            .arg("--pid-file=")
            .arg("--log-facility=-")
            .arg("--log-queries")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(logfile))
            // Its own group: signals reach the children it forks for TCP connections too.
            .process_group(0);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--user=root");
        }
        // SAFETY: prctl is async-signal-safe; it only sets this child's parent-death signal, so
        // dnsmasq dies with the thread that spawned it (the test's) even if Drop never runs.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = child.try_wait()? {
                let text = fs::read_to_string(&log).unwrap_or_default();
                let kind = if text.contains("Address already in use") {
                    io::ErrorKind::AddrInUse
                } else {
                    io::ErrorKind::Other
                };
                return Err(io::Error::new(
                    kind,
                    format!("dnsmasq exited {status}: {text}"),
                ));
            }
            // TCP accepts once UDP is bound too.
            if TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "dnsmasq is not ready",
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Dnsmasq {
            dir,
            port,
            binary: binary.to_path_buf(),
            child: Some(child),
            owns_dir,
        })
    }

    /// `127.0.0.1:PORT`
    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `"127.0.0.1:PORT"`, as a JSON string for a `Servers` list.
    pub fn server_json(&self) -> String {
        format!("\"{}\"", self.addr())
    }

    /// Replaces the hosts file `file` with `lines` (`127.0.0.11 web.test`) atomically.
    pub fn write_hosts(&self, file: &str, lines: &[(&str, &str)]) {
        let mut text = String::new();
        for (ip, name) in lines {
            text.push_str(&format!("{ip} {name}\n"));
        }
        let dir = self.dir.join("hosts.d");
        let tmp = dir.join(format!(".{file}.tmp"));
        fs::write(&tmp, text).expect("write hosts");
        fs::rename(&tmp, dir.join(file)).expect("rename hosts");
    }

    /// Deletes the hosts file `file` (its names become NXDOMAIN).
    pub fn remove_hosts(&self, file: &str) {
        fs::remove_file(self.dir.join("hosts.d").join(file)).expect("remove hosts");
    }

    /// What dnsmasq logged (queries included).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("dnsmasq.log")).unwrap_or_default()
    }

    fn signal_group(&self, signal: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill has no memory preconditions; the group is ours.
            unsafe {
                libc::kill(-(child.id() as i32), signal);
            }
        }
    }

    /// Freezes the whole group: sockets stay open, nothing answers (clients time out).
    pub fn pause(&self) {
        self.signal_group(libc::SIGSTOP);
    }

    /// Undoes [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal_group(libc::SIGCONT);
    }

    /// Ends the process (the directory stays for a restart).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }

    /// Starts again on the same port and directory with `mode` (new SRV records).
    pub fn restart(&mut self, mode: Mode) {
        self.stop();
        let mut last = None;
        for _ in 0..50 {
            match Dnsmasq::start_on(
                &self.binary,
                self.port,
                mode.clone(),
                Some(self.dir.clone()),
            ) {
                Ok(mut new) => {
                    self.child = new.child.take();
                    return;
                }
                // The old sockets may linger for a moment.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    last = Some(e);
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("dnsmasq did not restart: {e}"),
            }
        }
        panic!("dnsmasq did not restart on port {}: {last:?}", self.port);
    }
}

fn kill_group(child: &mut Child) {
    // SAFETY: kill has no memory preconditions; the group is ours.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
    let _ = child.wait();
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
        if self.owns_dir && std::env::var_os("KEEP_DNSMASQ_DIR").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
