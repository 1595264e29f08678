//! The webhook journal (trait; JSON-lines file synced per append): accepted events and deliveries, read back at start.
//! It never acknowledges what it could not write, and a torn last line is skipped, never fatal.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Record {
    /// An accepted event (sequence number, business, notification method, event, resource URI).
    Event {
        seq: u64,
        business: String,
        method: String,
        event_id: String,
        event: Value,
        uri: Option<String>,
        /// Unix seconds when it was accepted.
        at: i64,
    },
    /// An outgoing delivery of event `seq` to `url` was started.
    Pending { seq: u64, url: String },
    /// That delivery ended (`delivered` or `dead_letter`).
    Done {
        seq: u64,
        url: String,
        result: String,
    },
}

/// Where accepted events and deliveries are kept across restarts.
pub trait Journal: Send + Sync {
    /// Appends one record durably (synced) before returning.
    fn append(&self, record: &Record) -> io::Result<()>;
    /// Every record, oldest first.
    fn load(&self) -> io::Result<Vec<Record>>;
    /// Replaces the contents with `records` (compaction at start).
    fn rewrite(&self, records: &[Record]) -> io::Result<()>;
}

/// A JSON-lines file, synced after every append.
pub struct FileJournal {
    path: PathBuf,
    file: Mutex<File>,
}

impl FileJournal {
    pub fn open(path: &Path) -> io::Result<FileJournal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(FileJournal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }
}

impl Journal for FileJournal {
    fn append(&self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = self
            .file
            .lock()
            .map_err(|_| io::Error::other("journal lock poisoned"))?;
        f.write_all(&line)?;
        f.sync_data()
    }

    fn load(&self) -> io::Result<Vec<Record>> {
        let f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for (n, line) in BufReader::new(f).lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(r) => out.push(r),
                Err(e) => {
                    tracing::warn!(line = n + 1, error = %e, path = %self.path.display(), "skipping an unreadable journal line")
                }
            }
        }
        Ok(out)
    }

    fn rewrite(&self, records: &[Record]) -> io::Result<()> {
        let tmp = self.path.with_extension("compacting");
        {
            let mut out = File::create(&tmp)?;
            for r in records {
                let mut line = serde_json::to_vec(r).map_err(io::Error::other)?;
                line.push(b'\n');
                out.write_all(&line)?;
            }
            out.sync_all()?;
        }
        let mut f = self
            .file
            .lock()
            .map_err(|_| io::Error::other("journal lock poisoned"))?;
        std::fs::rename(&tmp, &self.path)?;
        *f = OpenOptions::new().append(true).open(&self.path)?;
        Ok(())
    }
}

/// What a journal holds after compaction: events accepted within `keep_secs` of `now`, and the
/// deliveries not yet done (with their events, whatever their age).
pub fn compact(records: Vec<Record>, now: i64, keep_secs: i64) -> Vec<Record> {
    use std::collections::HashSet;
    let done: HashSet<(u64, String)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Done { seq, url, .. } => Some((*seq, url.clone())),
            _ => None,
        })
        .collect();
    let pending: HashSet<u64> = records
        .iter()
        .filter_map(|r| match r {
            Record::Pending { seq, url } if !done.contains(&(*seq, url.clone())) => Some(*seq),
            _ => None,
        })
        .collect();
    records
        .into_iter()
        .filter(|r| match r {
            Record::Event { seq, at, .. } => now - at <= keep_secs || pending.contains(seq),
            Record::Pending { seq, url } => !done.contains(&(*seq, url.clone())),
            Record::Done { .. } => false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, at: i64) -> Record {
        Record::Event {
            seq,
            business: "spa".into(),
            method: "usp_webhook".into(),
            event_id: format!("e{seq}"),
            event: json!({"event_id": format!("e{seq}")}),
            uri: None,
            at,
        }
    }

    #[test]
    fn appends_survive_reopening_and_torn_lines_are_skipped() {
        let path =
            std::env::temp_dir().join(format!("portico-journal-{}.jsonl", uuid::Uuid::new_v4()));
        let j = FileJournal::open(&path).unwrap();
        j.append(&event(1, 100)).unwrap();
        j.append(&Record::Pending {
            seq: 1,
            url: "http://x/".into(),
        })
        .unwrap();
        drop(j);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"t\":\"event\",\"seq\":")
            .unwrap();
        let j = FileJournal::open(&path).unwrap();
        let back = j.load().unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], event(1, 100));
        j.rewrite(&back[..1]).unwrap();
        j.append(&event(2, 200)).unwrap();
        assert_eq!(j.load().unwrap(), vec![event(1, 100), event(2, 200)]);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn compaction_keeps_recent_events_and_open_deliveries() {
        let recs = vec![
            event(1, 0),
            Record::Pending {
                seq: 1,
                url: "u".into(),
            },
            event(2, 0),
            Record::Pending {
                seq: 2,
                url: "u".into(),
            },
            Record::Done {
                seq: 2,
                url: "u".into(),
                result: "delivered".into(),
            },
            event(3, 1000),
        ];
        let kept = compact(recs, 1000, 100);
        assert_eq!(
            kept,
            vec![
                event(1, 0),
                Record::Pending {
                    seq: 1,
                    url: "u".into()
                },
                event(3, 1000)
            ]
        );
    }
}
