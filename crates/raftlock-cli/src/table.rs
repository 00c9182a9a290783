//! Plain-text tables for the read commands (`status`, `locks`,
//! `session list`, `member list`).
//!
//! Laid out by comfy-table rather than fixed `{:<22}` widths: each column
//! is as wide as its widest cell, so a long lock name or address no longer
//! runs into the next column. No borders, two spaces between columns,
//! numbers right-aligned, so the output stays easy to read and to `awk`.

use comfy_table::{presets::NOTHING, CellAlignment, ContentArrangement, Table};

/// How a column's cells line up.
#[derive(Clone, Copy)]
pub enum Align {
    Left,
    Right,
}

/// A table with a header row; `render` lays it out.
pub struct TextTable {
    table: Table,
}

impl TextTable {
    /// A table whose columns are named and aligned by `columns`.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        let mut table = Table::new();
        table
            .load_preset(NOTHING)
            // Never wrap: scripts read one row per line, whatever the terminal.
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(columns.iter().map(|(name, _)| *name));
        let last = columns.len().saturating_sub(1);
        for (i, (_, align)) in columns.iter().enumerate() {
            if let Some(column) = table.column_mut(i) {
                column.set_padding((0, if i == last { 0 } else { 2 }));
                column.set_cell_alignment(match align {
                    Align::Left => CellAlignment::Left,
                    Align::Right => CellAlignment::Right,
                });
            }
        }
        Self { table }
    }

    /// Adds one row; cells are given in column order.
    pub fn row(&mut self, cells: Vec<String>) {
        self.table.add_row(cells);
    }

    /// The laid-out table, one line per row, without trailing spaces.
    pub fn render(&self) -> String {
        self.table
            .lines()
            .map(|line| line.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Prints the table to stdout.
    pub fn print(&self) {
        println!("{}", self.render());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_the_widest_cell_and_numbers_align_right() {
        let mut t = TextTable::new(&[("LOCK", Align::Left), ("TOKEN", Align::Right)]);
        t.row(vec!["a".into(), "7".into()]);
        t.row(vec!["orders/a-very-long-lock-name".into(), "12345".into()]);
        assert_eq!(
            t.render(),
            "LOCK                          TOKEN\n\
             a                                 7\n\
             orders/a-very-long-lock-name  12345"
        );
    }
}
