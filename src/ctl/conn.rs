//! A connection of one electctl command to the control socket: send a request line,
//! read answer lines.

use crate::control::connect_error;
use crate::json::{self, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) struct Conn {
    reader: BufReader<UnixStream>,
    path: PathBuf,
}

impl Conn {
    pub(super) fn open(path: &Path, timeout: Option<Duration>) -> Result<Conn, String> {
        let s = UnixStream::connect(path).map_err(|e| connect_error(path, &e))?;
        s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(Conn {
            reader: BufReader::new(s),
            path: path.to_path_buf(),
        })
    }

    pub(super) fn send(&mut self, cmd: &str) -> Result<(), String> {
        self.reader
            .get_mut()
            .write_all(format!("{cmd}\n").as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    pub(super) fn line(&mut self) -> Result<String, String> {
        let mut l = String::new();
        match self.reader.read_line(&mut l) {
            Ok(0) => Err(format!(
                "{}: the daemon closed the connection",
                self.path.display()
            )),
            Ok(_) => Ok(l),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    pub(super) fn request(&mut self, cmd: &str) -> Result<Value, String> {
        self.send(cmd)?;
        let l = self.line()?;
        let v = json::parse(l.trim()).map_err(|e| format!("unreadable answer: {e}"))?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(format!("electd: {e}"));
        }
        Ok(v)
    }
}
