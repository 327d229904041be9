//! The real `es-broker` binary as a test's broker: started on a free port
//! (`--listen 127.0.0.1:0`, the address read back from its "listening on"
//! log line) with a data directory the test owns, its output collected so
//! that a test can wait for a log line (bounded) and print the log when it
//! fails, and stopped with SIGTERM (a clean exit is asserted) or SIGKILL.
//! A broker still running when its handle drops is killed; one dropped
//! while its test panics prints the tail of its log.
//!
//! The binary's path comes from the caller: only es-broker's own tests know
//! it (`env!("CARGO_BIN_EXE_es-broker")`).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the broker may take to start or stop.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the broker logs once it accepts connections, before its address.
const LISTENING: &str = "listening on ";
/// What the broker logs once its schema registry serves, before its URL.
const REGISTRY_LISTENING: &str = "schema registry listening at ";
/// What the broker logs once its admin listener serves, before its URL.
const ADMIN_LISTENING: &str = "admin listener at ";

/// Resident memory of process `pid`, in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The most resident memory process `pid` has had, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// A running es-broker.
pub struct BrokerProcess {
    child: Option<Child>,
    pub addr: String,
    pub data_dir: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
    lines: mpsc::Receiver<String>,
}

impl BrokerProcess {
    /// Starts the binary `exe` on `data_dir` (which may hold data from an
    /// earlier run) with the flags `extra` (`--log-level info` unless they
    /// name a level), and waits until it listens.
    pub fn start(exe: &Path, data_dir: impl Into<PathBuf>, extra: &[&str]) -> BrokerProcess {
        let mut b = BrokerProcess::spawn(exe, data_dir, extra);
        b.wait_listening();
        b
    }

    /// Starts the binary as [`BrokerProcess::start`] does, without waiting:
    /// the nodes of a cluster can be ready only once enough of them run.
    /// Call [`BrokerProcess::wait_listening`] next.
    pub fn spawn(exe: &Path, data_dir: impl Into<PathBuf>, extra: &[&str]) -> BrokerProcess {
        let data_dir = data_dir.into();
        let mut cmd = Command::new(exe);
        cmd.arg("--data-dir").arg(&data_dir);
        if !extra.contains(&"--listener") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        // Tests run many brokers at once: the schema registry's fixed
        // default port would collide, so it is off unless a test asks.
        if !extra.contains(&"--schema-registry-listen") {
            cmd.args(["--schema-registry-listen", "none"]);
        }
        // The same for the admin listener (127.0.0.1:9644 by default).
        if !extra.contains(&"--admin-listen") {
            cmd.args(["--admin-listen", "none"]);
        }
        if !extra.contains(&"--log-level") {
            cmd.args(["--log-level", "info"]);
        }
        cmd.args(extra);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn es-broker");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let outs = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ];
        for out in outs.into_iter().flatten() {
            let tx = tx.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    log.lock().expect("log lock").push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        BrokerProcess {
            child: Some(child),
            addr: String::new(),
            data_dir,
            log,
            lines: rx,
        }
    }

    /// Waits until the broker accepts connections (after it registered
    /// with the metadata quorum) and reads its address from the log.
    pub fn wait_listening(&mut self) {
        self.wait_listening_within(START_TIMEOUT);
    }

    /// [`BrokerProcess::wait_listening`] for a start that may take longer
    /// than [`START_TIMEOUT`] (a data directory of thousands of partitions
    /// on a loaded machine).
    pub fn wait_listening_within(&mut self, timeout: Duration) {
        let line = self.wait_for_line(LISTENING, timeout);
        let rest = &line[line.find(LISTENING).expect("marker") + LISTENING.len()..];
        self.addr = rest.split_whitespace().next().expect("address").to_string();
    }

    /// As [`BrokerProcess::wait_listening`], but returns false instead of
    /// failing when the broker exits first (or does not listen within the
    /// start timeout): a caller that chose its ports may try others.
    pub fn wait_listening_or_exit(&mut self) -> bool {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.contains(LISTENING) => {
                    let rest = &line[line.find(LISTENING).expect("marker") + LISTENING.len()..];
                    self.addr = rest.split_whitespace().next().expect("address").to_string();
                    return true;
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let exited = self
                        .child
                        .as_mut()
                        .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
                    if exited || Instant::now() >= deadline {
                        return false;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// The bound address of listener `name` (with several `--listener`s),
    /// from its "listening on" log line.
    pub fn listener_addr(&self, name: &str) -> String {
        let field = format!("(listener {name},");
        let find = |log: &str| {
            log.lines()
                .filter(|l| l.contains(LISTENING))
                .find(|l| l.contains(&field))
                .and_then(|l| {
                    let rest = &l[l.find(LISTENING)? + LISTENING.len()..];
                    rest.split_whitespace().next().map(str::to_string)
                })
        };
        // The lines of the listeners after the first may still be on their
        // way from the reader threads.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let log = self.log_text();
            if let Some(a) = find(&log) {
                return a;
            }
            assert!(
                Instant::now() < deadline,
                "no listener {name} in the log:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The schema registry's base URL (`http://HOST:PORT`), from its
    /// "schema registry listening at" log line (started with
    /// `--schema-registry-listen HOST:PORT`).
    pub fn schema_registry_url(&mut self) -> String {
        let line = self.wait_for_line(REGISTRY_LISTENING, START_TIMEOUT);
        let rest =
            &line[line.find(REGISTRY_LISTENING).expect("marker") + REGISTRY_LISTENING.len()..];
        rest.split_whitespace().next().expect("url").to_string()
    }

    /// The admin listener's base URL (`http://HOST:PORT`), from its "admin
    /// listener at" log line (started with `--admin-listen HOST:PORT`).
    pub fn admin_url(&mut self) -> String {
        // It binds before the data directory opens: its line may be behind
        // the one `start` waited for.
        let logged = self
            .log_text()
            .lines()
            .find(|l| l.contains(ADMIN_LISTENING))
            .map(str::to_string);
        let line = logged.unwrap_or_else(|| self.wait_for_line(ADMIN_LISTENING, START_TIMEOUT));
        let rest = &line[line.find(ADMIN_LISTENING).expect("marker") + ADMIN_LISTENING.len()..];
        rest.split_whitespace().next().expect("url").to_string()
    }

    /// Waits for a log line containing `needle`, failing the test after `timeout`.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        self.wait_for_line_opt(needle, timeout).unwrap_or_else(|| {
            panic!(
                "no log line with {needle:?} within {timeout:?}; log:\n{}",
                self.log_text()
            )
        })
    }

    /// Everything the broker logged so far.
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// The process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends SIGTERM and waits for a clean exit; returns the log.
    pub fn stop(mut self) -> String {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                assert!(
                    s.success(),
                    "es-broker exited with {s}; log:\n{}",
                    self.log_text()
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "es-broker did not stop; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let the reader threads drain the last lines.
        let _ = self.wait_for_line_opt("stopped", Duration::from_secs(5));
        self.log_text()
    }

    /// SIGKILL: no shutdown work at all. Returns the data directory, for a
    /// restart on the same data.
    pub fn kill(mut self) -> PathBuf {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("wait");
        }
        self.data_dir.clone()
    }

    fn wait_for_line_opt(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

/// How many of a broker's last log lines a failing test prints.
const LOG_TAIL_ON_PANIC: usize = 200;

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failing test shows what each of its brokers last said:
            // often the only trace of a failure seen once, on CI.
            let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(LOG_TAIL_ON_PANIC)..];
            eprintln!(
                "---- es-broker at {} ({}), last {} log lines ----\n{}",
                self.addr,
                self.data_dir.display(),
                tail.len(),
                tail.join("\n")
            );
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
