//! [`Kept`]: a list kept in arrival order within a count and a number of bytes, the oldest
//! dropped first and counted, each item numbered so an index can find it again.

use std::collections::VecDeque;

/// Items in arrival order, at most `max_items` of them and `max_bytes` together (the newest
/// is kept even when it alone is larger); the oldest go first and are counted in
/// [`Kept::dropped`]. Each item has a number (its arrival), [`Kept::by_number`] finds it.
#[derive(Debug, Clone)]
pub struct Kept<T> {
    items: VecDeque<T>,
    sizes: VecDeque<usize>,
    /// The number of `items[0]`.
    first: u64,
    bytes: usize,
    max_items: usize,
    max_bytes: usize,
    dropped: u64,
}

impl<T> Kept<T> {
    /// An empty list bounded by `max_items` and `max_bytes`.
    pub fn new(max_items: usize, max_bytes: usize) -> Self {
        Self {
            items: VecDeque::new(),
            sizes: VecDeque::new(),
            first: 0,
            bytes: 0,
            max_items: max_items.max(1),
            max_bytes,
            dropped: 0,
        }
    }

    /// Adds `item` (about `size` bytes) and drops the oldest while over a bound; returns the
    /// item's number and what was dropped (oldest first; empty most of the time, which
    /// allocates nothing).
    pub fn push(&mut self, item: T, size: usize) -> (u64, Vec<T>) {
        self.items.push_back(item);
        self.sizes.push_back(size);
        self.bytes += size;
        let number = self.first + self.items.len() as u64 - 1;
        (number, self.trim())
    }

    /// Changes the byte bound, dropping the oldest while over it.
    pub fn set_max_bytes(&mut self, max_bytes: usize) -> Vec<T> {
        self.max_bytes = max_bytes;
        self.trim()
    }

    /// `delta` more bytes for the newest item (it grew in place).
    pub fn grew(&mut self, delta: usize) -> Vec<T> {
        if let Some(last) = self.sizes.back_mut() {
            *last += delta;
            self.bytes += delta;
        }
        self.trim()
    }

    fn trim(&mut self) -> Vec<T> {
        let mut gone = Vec::new();
        while self.items.len() > self.max_items
            || (self.bytes > self.max_bytes && self.items.len() > 1)
        {
            let (Some(item), Some(size)) = (self.items.pop_front(), self.sizes.pop_front()) else {
                break;
            };
            self.bytes -= size;
            self.first += 1;
            self.dropped += 1;
            gone.push(item);
        }
        gone
    }

    /// Drops every item, counted as dropped; numbering goes on from where it was.
    pub fn clear(&mut self) {
        self.first += self.items.len() as u64;
        self.dropped += self.items.len() as u64;
        self.items.clear();
        self.sizes.clear();
        self.bytes = 0;
    }

    /// The items, oldest first.
    pub fn items(&self) -> &VecDeque<T> {
        &self.items
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The item numbered `number`, while it is kept.
    pub fn by_number(&self, number: u64) -> Option<&T> {
        let i = usize::try_from(number.checked_sub(self.first)?).ok()?;
        self.items.get(i)
    }

    /// The item numbered `number`, to change in place (its size stays as it was pushed).
    pub fn by_number_mut(&mut self, number: u64) -> Option<&mut T> {
        let i = usize::try_from(number.checked_sub(self.first)?).ok()?;
        self.items.get_mut(i)
    }

    /// The number of the oldest item kept (or of the next one, when none is).
    pub fn first_number(&self) -> u64 {
        self.first
    }

    /// The number the next item will get.
    pub fn next_number(&self) -> u64 {
        self.first + self.items.len() as u64
    }

    /// Items dropped to stay within the bounds.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of the items kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The byte bound.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The newest item, to change in place.
    pub fn back_mut(&mut self) -> Option<&mut T> {
        self.items.back_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_by_count_and_by_bytes_and_are_counted() {
        let mut k = Kept::new(3, 100);
        for n in 0..3 {
            assert_eq!(k.push(n, 10), (n, vec![]));
        }
        assert_eq!(k.push(3, 10).1, vec![0], "over the count");
        assert_eq!(k.push(4, 85).1, vec![1, 2], "over the bytes");
        assert_eq!(k.items().iter().copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!((k.bytes(), k.dropped(), k.first_number()), (95, 3, 3));
        assert_eq!(k.by_number(4), Some(&4));
        assert_eq!(k.by_number(2), None);
        assert_eq!(k.push(5, 500).1, vec![3, 4], "the newest stays alone");
        assert_eq!(k.len(), 1);
        assert_eq!(k.set_max_bytes(10), Vec::<u64>::new());
        let mut g = Kept::new(10, 20);
        g.push("a", 5);
        g.push("b", 5);
        assert_eq!(g.grew(15), vec!["a"]);
        assert_eq!(g.bytes(), 20);
    }
}
