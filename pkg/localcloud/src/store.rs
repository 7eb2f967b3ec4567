//! The durable state store: named tables of JSON objects, kept in memory and made durable by a
//! write-ahead log. Each transaction appends one JSON line (all of its puts and deletes) and
//! `fsync`s the log before it counts as committed, so an acknowledged API write survives a
//! `kill -9` or a power cut, and a write is all-or-nothing: a torn last line can only belong to a
//! transaction that was never acknowledged and is dropped on replay. At open (and when the log
//! grows long) the tables are compacted into `state.json` by write-temp + `fsync` + rename +
//! directory `fsync`, then the log is truncated; records the snapshot already holds are skipped
//! by sequence number, so a crash between the two steps is harmless.
//!
//! Why a log of our own and not an embedded database: the state is small (a laptop-sized
//! cloud), must be readable by a learner (`state.json` is plain JSON), and every write is one
//! sequential append + `fsync`, which is as fast as a database's commit. Tables are generic
//! (`kind` → `id` → object) so part 2 (load balancers, listeners, pools, members) adds tables,
//! not a new store; [`Store::subscribe`] tells a data plane what changed.
//!
//! Beside the tables the store keeps an in-memory secondary index, rebuilt at open and kept in
//! step with every write and rollback: for each kind, every top-level string field, every array
//! of strings (`tags`, `security_groups`) and every array of `{"id": ...}` references (as
//! `loadbalancers.id`) maps its values to the objects holding them, so list filters and
//! relations ([`Read::ids_where`]) are answered without decoding a whole table.
//!
//! One process owns a state directory: `lock` is held with an exclusive file lock for the
//! store's lifetime, and a second open fails with [`Error::StateDirInUse`]. Within the process a
//! mutex serialises transactions; readers see only committed state.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::{Error, Result};

mod index;

use index::{build_index, ids_where, index_add, index_remove, Index};

/// One table: object ID → object.
pub type Table = BTreeMap<String, Value>;
/// All tables by kind.
pub type Tables = BTreeMap<String, Table>;

const SNAPSHOT: &str = "state.json";
const LOG: &str = "wal.jsonl";
const LOCK: &str = "lock";
/// Compact when the log holds this many records.
const COMPACT_AFTER: u64 = 10_000;

/// A committed change, as told to subscribers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: String,
    pub id: String,
    pub deleted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Op {
    Put {
        kind: String,
        id: String,
        value: Value,
    },
    Delete {
        kind: String,
        id: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    seq: u64,
    ops: Vec<Op>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Snapshot {
    seq: u64,
    tables: Tables,
}

struct Inner {
    tables: Tables,
    index: Index,
    log: File,
    seq: u64,
    log_records: u64,
}

/// The store of one state directory. See the module docs.
pub struct Store {
    dir: PathBuf,
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Change>,
    // Held for the lifetime of the store: the OS releases the lock when the file is closed,
    // also when the process is killed.
    _lock: File,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

/// Whether a server holds the lock of `dir` right now.
pub fn is_locked(dir: &Path) -> bool {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(LOCK))
    else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(_) => true,
    }
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, takes its lock, replays the log and
    /// compacts it.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|source| Error::CreateStateDir {
            path: dir.to_owned(),
            source,
        })?;
        let lock_path = dir.join(LOCK);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|source| Error::LockStateDir {
                path: lock_path.clone(),
                source,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::StateDirInUse {
                    path: dir.to_owned(),
                })
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(Error::LockStateDir {
                    path: lock_path,
                    source,
                })
            }
        }
        // The PID is for humans; the lock itself is what keeps a second server out.
        let mut lock = lock;
        let _ = lock.set_len(0);
        let _ = writeln!(lock, "{}", std::process::id());

        let snapshot_path = dir.join(SNAPSHOT);
        let mut snapshot = match std::fs::read(&snapshot_path) {
            Ok(bytes) => serde_json::from_slice::<Snapshot>(&bytes).map_err(|source| {
                Error::DecodeSnapshot {
                    path: snapshot_path.clone(),
                    source,
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Snapshot::default(),
            Err(source) => {
                return Err(Error::ReadSnapshot {
                    path: snapshot_path,
                    source,
                })
            }
        };
        let log_path = dir.join(LOG);
        let mut log = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&log_path)
            .map_err(|source| Error::OpenLog {
                path: log_path.clone(),
                source,
            })?;
        replay(&log_path, &mut log, &mut snapshot)?;
        let (changes, _) = broadcast::channel(1024);
        let store = Store {
            dir: dir.to_owned(),
            inner: Mutex::new(Inner {
                index: build_index(&snapshot.tables),
                tables: snapshot.tables,
                log,
                seq: snapshot.seq,
                log_records: 0,
            }),
            changes,
            _lock: lock,
        };
        {
            let mut inner = store.lock();
            store.compact(&mut inner)?;
        }
        Ok(store)
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic inside a transaction cannot leave half-applied state behind (see `write`),
        // so a poisoned lock is safe to take over.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on a consistent view of the committed state.
    pub fn read<R>(&self, f: impl FnOnce(&View<'_>) -> R) -> R {
        let inner = self.lock();
        f(&View {
            tables: &inner.tables,
            index: &inner.index,
        })
    }

    /// Runs the transaction `f`. If it returns `Ok`, its writes are appended to the log and
    /// `fsync`ed before this returns; if it returns `Err` (or the log write fails), every write
    /// it made is undone and the state is unchanged.
    pub fn write<R, E>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<R, E>) -> Result<R, E>
    where
        E: From<Error>,
    {
        self.write_changes(f).map(|(out, _)| out)
    }

    /// [`Store::write`], also returning the changes it committed (what subscribers are told),
    /// for a caller that must act on them before answering (the volume backing files).
    pub fn write_changes<R, E>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<R, E>,
    ) -> Result<(R, Vec<Change>), E>
    where
        E: From<Error>,
    {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let mut tx = Tx {
            tables: &mut inner.tables,
            index: &mut inner.index,
            ops: Vec::new(),
            undo: Vec::new(),
        };
        let out = match f(&mut tx) {
            Ok(out) => out,
            Err(e) => {
                tx.rollback();
                return Err(e);
            }
        };
        if tx.ops.is_empty() {
            return Ok((out, Vec::new()));
        }
        let record = Record {
            seq: inner.seq + 1,
            ops: std::mem::take(&mut tx.ops),
        };
        let appended = append(&self.dir.join(LOG), &mut inner.log, &record);
        if let Err(e) = appended {
            tx.rollback();
            return Err(e.into());
        }
        // Committed: nothing to undo when `tx` is dropped.
        tx.undo.clear();
        drop(tx);
        inner.seq = record.seq;
        inner.log_records += 1;
        let mut changes = Vec::with_capacity(record.ops.len());
        for op in &record.ops {
            let change = match op {
                Op::Put { kind, id, .. } => Change {
                    kind: kind.clone(),
                    id: id.clone(),
                    deleted: false,
                },
                Op::Delete { kind, id } => Change {
                    kind: kind.clone(),
                    id: id.clone(),
                    deleted: true,
                },
            };
            // No subscribers is fine.
            let _ = self.changes.send(change.clone());
            changes.push(change);
        }
        if inner.log_records >= COMPACT_AFTER {
            // The write is already durable in the log; a failed compaction only means a longer
            // log to replay next time.
            if let Err(error) = self.compact(inner) {
                tracing::warn!(%error, "compacting the local-cloud state failed");
            }
        }
        Ok((out, changes))
    }

    /// Committed changes from now on (for data planes that follow the state, e.g. listeners).
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn compact(&self, inner: &mut Inner) -> Result<()> {
        let path = self.dir.join(SNAPSHOT);
        let snapshot = SnapshotRef {
            seq: inner.seq,
            tables: &inner.tables,
        };
        let bytes = serde_json::to_vec_pretty(&snapshot).map_err(|source| Error::Encode {
            what: "snapshot",
            source,
        })?;
        write_atomic(&path, &bytes).map_err(|source| Error::WriteSnapshot {
            path: path.clone(),
            source,
        })?;
        let log_path = self.dir.join(LOG);
        inner
            .log
            .set_len(0)
            .and_then(|()| inner.log.sync_all())
            .map_err(|source| Error::AppendLog {
                path: log_path,
                source,
            })?;
        inner.log_records = 0;
        Ok(())
    }
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    seq: u64,
    tables: &'a Tables,
}

fn append(path: &Path, log: &mut File, record: &Record) -> Result<()> {
    let mut line = serde_json::to_vec(record).map_err(|source| Error::Encode {
        what: "log record",
        source,
    })?;
    line.push(b'\n');
    log.write_all(&line)
        .and_then(|()| log.sync_data())
        .map_err(|source| Error::AppendLog {
            path: path.to_owned(),
            source,
        })
}

fn replay(path: &Path, log: &mut File, snapshot: &mut Snapshot) -> Result<()> {
    log.seek(SeekFrom::Start(0))
        .map_err(|source| Error::OpenLog {
            path: path.to_owned(),
            source,
        })?;
    let mut reader = BufReader::new(&*log);
    let mut good_len: u64 = 0;
    let mut record_no: u64 = 0;
    let mut line = Vec::new();
    let mut torn = false;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| Error::OpenLog {
                path: path.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        record_no += 1;
        let complete = line.last() == Some(&b'\n');
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) if complete => {
                if record.seq > snapshot.seq {
                    apply(&mut snapshot.tables, record.ops);
                    snapshot.seq = record.seq;
                }
                good_len += n as u64;
            }
            Ok(_) | Err(_) => {
                // Only the very last line may be torn: that write was never acknowledged.
                let mut rest = Vec::new();
                let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
                if rest.iter().any(|b| !b.is_ascii_whitespace()) {
                    return Err(Error::ReplayLog {
                        path: path.to_owned(),
                        record: record_no,
                        reason: "undecodable record before the end of the log".into(),
                    });
                }
                torn = true;
                break;
            }
        }
    }
    if torn {
        tracing::warn!(path = %path.display(), "dropping a torn, unacknowledged last log record");
        log.set_len(good_len)
            .and_then(|()| log.sync_all())
            .map_err(|source| Error::AppendLog {
                path: path.to_owned(),
                source,
            })?;
    }
    Ok(())
}

fn apply(tables: &mut Tables, ops: Vec<Op>) {
    for op in ops {
        match op {
            Op::Put { kind, id, value } => {
                tables.entry(kind).or_default().insert(id, value);
            }
            Op::Delete { kind, id } => {
                if let Some(table) = tables.get_mut(&kind) {
                    table.remove(&id);
                }
            }
        }
    }
}

/// Writes `path` so that it holds either the old or the new content, never a mix, and the new
/// content is durable when this returns.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replace(path, bytes, true)
}

/// Writes `path` by write-temp + rename: readers see the old or the new content, never a mix.
/// With `durable`, the file and its directory are `fsync`ed too.
pub fn write_replace(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp"));
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
    }
    std::fs::rename(&tmp, path)?;
    if durable {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Reading, the same inside a transaction ([`Tx`]) and outside ([`View`]).
pub trait Read {
    /// The object `id` of `kind`, decoded.
    fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Option<T>;
    /// Every object of `kind`, decoded (undecodable ones are skipped).
    fn list<T: DeserializeOwned>(&self, kind: &str) -> Vec<T>;
    /// The IDs of the objects of `kind` whose `field` is (or, for an array, holds) `value`,
    /// from the index; `loadbalancers.id` for arrays of references.
    fn ids_where(&self, kind: &str, field: &str, value: &str) -> BTreeSet<String>;
    /// The objects [`Read::ids_where`] names, decoded.
    fn list_where<T: DeserializeOwned>(&self, kind: &str, field: &str, value: &str) -> Vec<T> {
        self.ids_where(kind, field, value)
            .iter()
            .filter_map(|id| self.get(kind, id))
            .collect()
    }
}

impl Read for View<'_> {
    fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Option<T> {
        get(self.tables, kind, id)
    }
    fn list<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        list(self.tables, kind)
    }
    fn ids_where(&self, kind: &str, field: &str, value: &str) -> BTreeSet<String> {
        ids_where(self.index, kind, field, value)
    }
}

impl Read for Tx<'_> {
    fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Option<T> {
        get(self.tables, kind, id)
    }
    fn list<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        list(self.tables, kind)
    }
    fn ids_where(&self, kind: &str, field: &str, value: &str) -> BTreeSet<String> {
        ids_where(self.index, kind, field, value)
    }
}

/// A read-only view of the committed tables.
pub struct View<'a> {
    tables: &'a Tables,
    index: &'a Index,
}

impl View<'_> {
    /// How many objects of `kind` exist.
    pub fn count(&self, kind: &str) -> usize {
        self.tables.get(kind).map_or(0, BTreeMap::len)
    }
}

fn get<T: DeserializeOwned>(tables: &Tables, kind: &str, id: &str) -> Option<T> {
    let value = tables.get(kind)?.get(id)?;
    T::deserialize(value).ok()
}

fn list<T: DeserializeOwned>(tables: &Tables, kind: &str) -> Vec<T> {
    tables
        .get(kind)
        .map(|t| t.values().filter_map(|v| T::deserialize(v).ok()).collect())
        .unwrap_or_default()
}

/// A transaction in progress: reads see its own writes. Dropped without committing (an error,
/// or a panic unwinding through it), it undoes its writes.
pub struct Tx<'a> {
    tables: &'a mut Tables,
    index: &'a mut Index,
    ops: Vec<Op>,
    undo: Vec<(String, String, Option<Value>)>,
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        self.rollback();
    }
}

impl Tx<'_> {
    /// How many objects of `kind` exist.
    pub fn count(&self, kind: &str) -> usize {
        self.tables.get(kind).map_or(0, BTreeMap::len)
    }

    /// Creates or replaces object `id` of `kind`.
    pub fn put<T: Serialize>(&mut self, kind: &str, id: &str, value: &T) -> Result<()> {
        let value = serde_json::to_value(value).map_err(|source| Error::Encode {
            what: "object",
            source,
        })?;
        let old = self
            .tables
            .entry(kind.to_owned())
            .or_default()
            .insert(id.to_owned(), value.clone());
        if let Some(old) = &old {
            index_remove(self.index, kind, id, old);
        }
        index_add(self.index, kind, id, &value);
        self.undo.push((kind.to_owned(), id.to_owned(), old));
        self.ops.push(Op::Put {
            kind: kind.to_owned(),
            id: id.to_owned(),
            value,
        });
        Ok(())
    }

    /// Deletes object `id` of `kind`; whether it existed.
    pub fn delete(&mut self, kind: &str, id: &str) -> bool {
        let old = self.tables.get_mut(kind).and_then(|t| t.remove(id));
        if let Some(old) = &old {
            index_remove(self.index, kind, id, old);
        }
        let existed = old.is_some();
        if existed {
            self.undo.push((kind.to_owned(), id.to_owned(), old));
            self.ops.push(Op::Delete {
                kind: kind.to_owned(),
                id: id.to_owned(),
            });
        }
        existed
    }

    fn rollback(&mut self) {
        while let Some((kind, id, old)) = self.undo.pop() {
            let table = self.tables.entry(kind.clone()).or_default();
            // The index entries of what is there now go before the old object's come back
            // (both may share a value, such as the name).
            if let Some(current) = table.remove(&id) {
                index_remove(self.index, &kind, &id, &current);
            }
            if let Some(v) = old {
                index_add(self.index, &kind, &id, &v);
                table.insert(id, v);
            }
        }
        self.ops.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_index_follows_writes_rollbacks_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ids = |s: &Store, field: &str, value: &str| -> Vec<String> {
            s.read(|r| r.ids_where("lbs", field, value).into_iter().collect())
        };
        store
            .write(|tx| {
                tx.put(
                    "lbs",
                    "a",
                    &json!({"name": "web", "tags": ["x"], "loadbalancers": [{"id": "p"}]}),
                )?;
                tx.put("lbs", "b", &json!({"name": "web", "n": 1}))?;
                Ok::<_, Error>(())
            })
            .unwrap();
        assert_eq!(ids(&store, "name", "web"), ["a", "b"]);
        assert_eq!(ids(&store, "tags", "x"), ["a"]);
        assert_eq!(ids(&store, "loadbalancers.id", "p"), ["a"]);
        // A failed transaction's renames and deletes leave the index as it was.
        let failed: Result<(), Error> = store.write(|tx| {
            tx.put("lbs", "a", &json!({"name": "db"}))?;
            tx.delete("lbs", "b");
            Err(Error::Serve("no".into()))
        });
        assert!(failed.is_err());
        assert_eq!(ids(&store, "name", "web"), ["a", "b"]);
        assert!(ids(&store, "name", "db").is_empty());
        store
            .write(|tx| {
                tx.put("lbs", "a", &json!({"name": "db"}))?;
                tx.delete("lbs", "b");
                Ok::<_, Error>(())
            })
            .unwrap();
        assert!(ids(&store, "name", "web").is_empty());
        assert_eq!(ids(&store, "name", "db"), ["a"]);
        assert!(ids(&store, "tags", "x").is_empty());
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(ids(&store, "name", "db"), ["a"]);
        assert_eq!(
            store.read(|r| r.list_where::<Value>("lbs", "name", "db")),
            [json!({"name": "db"})]
        );
    }

    #[test]
    fn writes_survive_reopen_and_failed_transactions_leave_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .write(|tx| -> Result<()> {
                    tx.put("servers", "a", &json!({"name": "a"}))?;
                    tx.put("servers", "b", &json!({"name": "b"}))
                })
                .unwrap();
            let failed: Result<(), Error> = store.write(|tx| {
                tx.put("servers", "c", &json!({"name": "c"}))?;
                tx.delete("servers", "a");
                Err(Error::NoHome)
            });
            assert!(failed.is_err());
            assert_eq!(store.read(|v| v.count("servers")), 2);
            store
                .write(|tx| -> Result<()> {
                    tx.delete("servers", "b");
                    Ok(())
                })
                .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let names: Vec<Value> = store.read(|v| v.list("servers"));
        assert_eq!(names, vec![json!({"name": "a"})]);
    }

    #[test]
    fn a_panicking_transaction_leaves_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.write(|tx| tx.put("x", "keep", &json!(1))).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Result<(), Error> = store.write(|tx| {
                tx.put("x", "half", &json!(2))?;
                tx.delete("x", "keep");
                panic!("handler bug");
            });
        }));
        assert!(panicked.is_err());
        let ids: Vec<Value> = store.read(|v| v.list("x"));
        assert_eq!(ids, vec![json!(1)]);
        store.write(|tx| tx.put("x", "after", &json!(3))).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read(|v| v.count("x")), 2);
    }

    #[test]
    fn second_open_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::open(dir.path()).unwrap();
        assert!(is_locked(dir.path()));
        let second = Store::open(dir.path());
        assert!(
            matches!(second, Err(Error::StateDirInUse { .. })),
            "{second:?}"
        );
        drop(first);
        assert!(!is_locked(dir.path()));
        Store::open(dir.path()).unwrap();
    }

    #[test]
    fn torn_last_record_is_dropped_but_corruption_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .write(|tx| tx.put("volumes", "v1", &json!({"size": 1})))
                .unwrap();
        }
        let log = dir.path().join(LOG);
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"{\"seq\":99,\"ops\":[{\"put\":").unwrap();
        drop(f);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read(|v| v.count("volumes")), 1);
        store
            .write(|tx| tx.put("volumes", "v2", &json!({"size": 2})))
            .unwrap();
        drop(store);

        std::fs::write(&log, b"garbage\n{\"seq\":1000,\"ops\":[]}\n").unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::ReplayLog { .. }), "{err}");
    }

    #[test]
    fn subscribers_see_committed_changes_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut rx = store.subscribe();
        let _: Result<(), Error> = store.write(|tx| {
            tx.put("x", "1", &json!(1))?;
            Err(Error::NoHome)
        });
        store.write(|tx| tx.put("x", "2", &json!(2))).unwrap();
        let change = rx.try_recv().unwrap();
        assert_eq!(change.id, "2");
        assert!(rx.try_recv().is_err());
    }
}
