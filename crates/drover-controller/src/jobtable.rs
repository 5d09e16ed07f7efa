//! The controller's jobs by id, and the readers' copy of them.
//!
//! ```text
//!  owner: insert / get_mut / remove ──► map (BTreeMap<JobId, Arc<Job>>)
//!                                   └─► dirty chunks (id / CHUNK)
//!  publish: rebuild the dirty chunks ──► JobList (the view's jobs: shared chunks, id order)
//! ```
//!
//! A published view used to copy every job's `Arc` on each pass, and dropping the previous
//! view released them all again: O(queue) per pass, the largest cost of a submission in a
//! controller that keeps a few thousand ended jobs for `MinJobAge`. The readers' list is now
//! kept in chunks of consecutive ids; a pass rebuilds only the chunks whose jobs changed and
//! shares the others with the view before it.

use crate::state::Job;
use drover_model::job::JobId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Job ids per chunk of the readers' list (a power of two, so a chunk's ids fit in `JobId`).
const CHUNK: JobId = 512;

fn chunk_of(id: JobId) -> JobId {
    id / CHUNK
}

/// The jobs by id. Every change goes through the methods here, which note the chunk it
/// touches; reads are those of a map.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobTable {
    map: BTreeMap<JobId, Arc<Job>>,
    /// The readers' chunks as last published, by chunk number.
    #[serde(skip)]
    published: BTreeMap<JobId, Arc<[Arc<Job>]>>,
    /// Chunks changed since the last publish.
    #[serde(skip)]
    dirty: BTreeSet<JobId>,
}

impl PartialEq for JobTable {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

/// `table[&id]`: the job of an id that must be there.
impl std::ops::Index<&JobId> for JobTable {
    type Output = Arc<Job>;
    fn index(&self, id: &JobId) -> &Arc<Job> {
        &self.map[id]
    }
}

impl JobTable {
    pub fn get(&self, id: &JobId) -> Option<&Arc<Job>> {
        self.map.get(id)
    }

    pub fn contains_key(&self, id: &JobId) -> bool {
        self.map.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn values(&self) -> std::collections::btree_map::Values<'_, JobId, Arc<Job>> {
        self.map.values()
    }

    pub fn range<R: std::ops::RangeBounds<JobId>>(
        &self,
        r: R,
    ) -> std::collections::btree_map::Range<'_, JobId, Arc<Job>> {
        self.map.range(r)
    }

    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut Arc<Job>> {
        let j = self.map.get_mut(id)?;
        self.dirty.insert(chunk_of(*id));
        Some(j)
    }

    pub fn insert(&mut self, id: JobId, j: Arc<Job>) -> Option<Arc<Job>> {
        self.dirty.insert(chunk_of(id));
        self.map.insert(id, j)
    }

    pub fn remove(&mut self, id: &JobId) -> Option<Arc<Job>> {
        let j = self.map.remove(id)?;
        self.dirty.insert(chunk_of(*id));
        Some(j)
    }

    /// Changes every job that `select` picks.
    pub fn update_where(&mut self, select: impl Fn(&Job) -> bool, mut change: impl FnMut(&mut Arc<Job>)) {
        for (id, j) in self.map.iter_mut().filter(|(_, j)| select(j)) {
            self.dirty.insert(chunk_of(*id));
            change(j);
        }
    }

    /// The readers' list as it is now: the chunks changed since the last call are rebuilt,
    /// the others shared with the list that call returned.
    pub fn publish(&mut self) -> JobList {
        if self.published.is_empty() {
            // Nothing published yet (a table read back from a snapshot): every chunk.
            self.dirty.extend(self.map.keys().map(|id| chunk_of(*id)));
        }
        for c in std::mem::take(&mut self.dirty) {
            let ids = c * CHUNK..=c * CHUNK + (CHUNK - 1);
            let jobs: Arc<[Arc<Job>]> = self.map.range(ids).map(|(_, j)| j.clone()).collect();
            if jobs.is_empty() {
                self.published.remove(&c);
            } else {
                self.published.insert(c, jobs);
            }
        }
        JobList { chunks: self.published.values().cloned().collect() }
    }
}

/// The jobs of a published view, in id order, in chunks shared between views.
#[derive(Debug, Clone, Default)]
pub struct JobList {
    chunks: Arc<[Arc<[Arc<Job>]>]>,
}

impl JobList {
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Job>> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The list in consecutive parts (ranges of chunks) of at least `n` jobs each (the last
    /// may have fewer; an empty list has one, empty).
    pub fn parts(&self, n: usize) -> Vec<std::ops::Range<usize>> {
        let mut parts = Vec::new();
        let (mut start, mut count) = (0, 0);
        for (i, c) in self.chunks.iter().enumerate() {
            count += c.len();
            if count >= n {
                parts.push(start..i + 1);
                (start, count) = (i + 1, 0);
            }
        }
        if start < self.chunks.len() || parts.is_empty() {
            parts.push(start..self.chunks.len());
        }
        parts
    }

    /// The chunks, which [`JobList::parts`] index.
    pub fn chunks(&self) -> &[Arc<[Arc<Job>]>] {
        &self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::JobStatus;
    use drover_model::job::JobSpec;

    fn job(id: JobId) -> Arc<Job> {
        Arc::new(Job::new(id, &JobSpec::default(), JobStatus::pending(0, 0, "debug", 1, None), None))
    }

    fn ids(l: &JobList) -> Vec<JobId> {
        l.iter().map(|j| j.id).collect()
    }

    fn table(ids: impl IntoIterator<Item = JobId>) -> JobTable {
        let mut t = JobTable::default();
        for id in ids {
            t.insert(id, job(id));
        }
        t
    }

    #[test]
    fn the_list_follows_every_change() {
        let mut t = table([1, 2, 600, 5000]);
        assert_eq!(ids(&t.publish()), [1, 2, 600, 5000]);
        t.remove(&2);
        t.insert(601, job(601));
        assert_eq!(ids(&t.publish()), [1, 600, 601, 5000]);
        Arc::make_mut(t.get_mut(&600).unwrap()).status.priority = 7;
        let l = t.publish();
        assert_eq!(l.iter().find(|j| j.id == 600).unwrap().status.priority, 7);
        assert_eq!(l.iter().count(), 4);
        // A chunk whose last job leaves goes.
        t.remove(&5000);
        assert_eq!(ids(&t.publish()), [1, 600, 601]);
        t.update_where(|j| j.id > 100, |j| Arc::make_mut(j).status.priority = 9);
        let l = t.publish();
        assert_eq!(l.iter().map(|j| j.status.priority).collect::<Vec<_>>(), [1, 9, 9]);
    }

    #[test]
    fn unchanged_chunks_are_shared_with_the_list_before() {
        let mut t = table(0..2000);
        let a = t.publish();
        t.insert(1999, job(1999));
        let b = t.publish();
        assert!(Arc::ptr_eq(&a.chunks[0], &b.chunks[0]));
        assert!(!Arc::ptr_eq(&a.chunks[3], &b.chunks[3]));
    }

    #[test]
    fn a_table_read_back_from_a_snapshot_publishes_all_its_jobs() {
        let t = table([3, 900, u32::MAX]);
        let mut back: JobTable = postcard::from_bytes(&postcard::to_stdvec(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(ids(&back.publish()), [3, 900, u32::MAX]);
        // The same bytes as the map alone: snapshots written before the table read back.
        assert_eq!(postcard::to_stdvec(&t).unwrap(), postcard::to_stdvec(&t.map).unwrap());
    }

    #[test]
    fn parts_cover_the_list_in_order() {
        let mut t = table((0..3000).map(|i| i * 3));
        let l = t.publish();
        let parts = l.parts(1000);
        assert!(parts.len() > 1);
        let all: Vec<JobId> =
            parts.iter().flat_map(|p| l.chunks()[p.clone()].iter().flat_map(|c| c.iter().map(|j| j.id))).collect();
        assert_eq!(all, ids(&l));
        assert!(parts[..parts.len() - 1]
            .iter()
            .all(|p| l.chunks()[p.clone()].iter().map(|c| c.len()).sum::<usize>() >= 1000));
        assert_eq!(JobTable::default().publish().parts(1000), vec![0..0]);
    }
}
