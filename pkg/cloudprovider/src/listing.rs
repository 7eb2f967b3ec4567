//! A provider's cached listing of its instances, indexed by name and by ID, so that a look-up
//! costs the same with 5000 instances as with 5: the controllers ask about one Node at a time
//! (upstream's contract has no list call) and the lifecycle pass asks about every not-Ready
//! Node each period. Providers build one per listing of the cloud and share it behind an `Arc`.

use std::collections::HashMap;

/// Instances of one listing, in the cloud's order, with their indexes.
#[derive(Debug)]
pub struct Listing<T> {
    items: Vec<T>,
    by_name: HashMap<String, Vec<usize>>,
    by_id: HashMap<String, usize>,
}

impl<T> Listing<T> {
    /// Indexes `items` by `name` (names may repeat: clouds allow it) and `id` (the first
    /// instance of an ID wins).
    pub fn new(items: Vec<T>, name: impl Fn(&T) -> &str, id: impl Fn(&T) -> &str) -> Self {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::with_capacity(items.len());
        let mut by_id = HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            by_name.entry(name(item).to_owned()).or_default().push(i);
            by_id.entry(id(item).to_owned()).or_insert(i);
        }
        Listing {
            items,
            by_name,
            by_id,
        }
    }

    /// Every instance of that name, in listing order.
    pub fn named(&self, name: &str) -> Vec<&T> {
        self.by_name
            .get(name)
            .map(|ix| ix.iter().filter_map(|&i| self.items.get(i)).collect())
            .unwrap_or_default()
    }

    /// The instance with that ID.
    pub fn by_id(&self, id: &str) -> Option<&T> {
        self.by_id.get(id).and_then(|&i| self.items.get(i))
    }
}

impl<T> std::ops::Deref for Listing<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_name_and_id_and_keeps_duplicates_and_order() {
        let l = Listing::new(
            vec![("a", "1"), ("b", "2"), ("a", "3"), ("c", "2")],
            |x| x.0,
            |x| x.1,
        );
        assert_eq!(l.named("a"), vec![&("a", "1"), &("a", "3")]);
        assert!(l.named("z").is_empty());
        assert_eq!(l.by_id("2"), Some(&("b", "2")));
        assert_eq!(l.by_id("9"), None);
        assert_eq!(l.len(), 4);
        assert_eq!(
            l.iter().map(|x| x.1).collect::<Vec<_>>(),
            ["1", "2", "3", "2"]
        );
    }
}
