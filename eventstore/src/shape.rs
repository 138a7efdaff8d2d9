//! The shape of an append statement: which of its optional parts a batch needs.
//!
//! An append statement names only the tables its batch writes. Postgres starts every
//! part a statement names on each execution, whether it has rows or not: an empty insert
//! into the outbox opens the outbox, its indexes and its foreign keys all the same.
//! Measured on a durable Postgres, a step's statement with the parts it does not use
//! cost a third more of the backend's CPU than the statement shaped to it.
//!
//! Each shape is one SQL text, built once and prepared once per connection (sqlx keeps
//! prepared statements by their text); there are at most [`SHAPES`] of them.

use std::sync::OnceLock;

/// The optional parts of an append statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Shape {
    /// Outbox rows to insert.
    pub outbox: bool,
    /// Outbox rows to mark published.
    pub marks: bool,
    /// Attempts to claim for the appending process.
    pub claims: bool,
    /// An attempt's claim that the append ends (an activity outcome).
    pub claim_end: bool,
    /// Timers to insert.
    pub timers: bool,
    /// The index row to move (otherwise the caller moved it already).
    pub index: bool,
    /// The index row to insert: a start written in one statement (single statement only).
    pub create: bool,
}

/// How many shapes there are: one per combination of the parts.
pub(crate) const SHAPES: usize = 1 << 7;

impl Shape {
    fn number(self) -> usize {
        [
            self.outbox,
            self.marks,
            self.claims,
            self.claim_end,
            self.timers,
            self.index,
            self.create,
        ]
        .iter()
        .enumerate()
        .map(|(bit, on)| usize::from(*on) << bit)
        .sum()
    }

    /// The SQL text of this shape from `cache`, built by `build` the first time.
    pub(crate) fn text(
        self,
        cache: &'static [OnceLock<String>; SHAPES],
        build: fn(Shape) -> String,
    ) -> &'static str {
        cache[self.number()].get_or_init(|| build(self))
    }
}

#[cfg(test)]
impl Shape {
    /// The shape numbered `n` (`n < SHAPES`).
    fn numbered(n: usize) -> Self {
        let bit = |b: usize| n & (1 << b) != 0;
        Self {
            outbox: bit(0),
            marks: bit(1),
            claims: bit(2),
            claim_end: bit(3),
            timers: bit(4),
            index: bit(5),
            create: bit(6),
        }
    }
}

/// Every text an append statement can take: each shape of the single statement, and of
/// the group statement (which always moves index rows).
#[cfg(test)]
fn append_statement_texts() -> Vec<&'static str> {
    let single = (0..SHAPES).map(|n| {
        Shape::numbered(n).text(
            &crate::append::statement::SINGLE_STATEMENTS,
            crate::append::statement::single_statement,
        )
    });
    let group = (0..SHAPES)
        .map(Shape::numbered)
        .filter(|shape| shape.index)
        .map(|shape| {
            shape.text(
                &crate::group::statement::GROUP_STATEMENTS,
                crate::group::statement::group_statement,
            )
        });
    single.chain(group).collect()
}

/// `part` when `on`, else nothing: the optional parts of a statement's text.
pub(crate) fn part(on: bool, part: &str) -> &str {
    if on {
        part
    } else {
        ""
    }
}

/// A column of the answer: `present` when the part it reads is there, else `absent`.
pub(crate) fn column<'a>(on: bool, present: &'a str, absent: &'a str) -> &'a str {
    if on {
        present
    } else {
        absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_a_text_for_every_shape_and_each_differs() {
        let texts = append_statement_texts();
        assert_eq!(texts.len(), SHAPES + SHAPES / 2);
        let distinct: std::collections::BTreeSet<_> = texts.iter().collect();
        assert_eq!(distinct.len(), texts.len());
    }

    #[test]
    fn every_shape_has_its_own_number() {
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..SHAPES {
            let shape = Shape::numbered(n);
            assert_eq!(shape.number(), n);
            seen.insert(shape.number());
        }
        assert_eq!(seen.len(), SHAPES);
    }
}
