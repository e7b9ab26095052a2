//! Writing the comparison table: msprobe 1.1.1's `compare_result{suffix}_{time}.xlsx` (same
//! columns, same cell types, red/yellow rows) and a CSV beside it with the same columns.

use super::highlight::Highlight;
use super::value::Cell;
use rust_xlsxwriter::{Color, Format, FormatPattern, Workbook};
use std::path::Path;

/// The text openpyxl would store for a non-numeric cell (msprobe appends a tab to inf/nan).
fn xlsx_text(c: &Cell) -> String {
    let s = c.py_str();
    if s == "inf" || s == "-inf" || s == "nan" {
        format!("{s}\t")
    } else {
        s
    }
}

/// Writes the xlsx file. `extra` is an optional second sheet (name, lines).
pub fn write_xlsx(
    path: &Path,
    header: &[&str],
    rows: &[Vec<Cell>],
    hl: &Highlight,
    extra: Option<(&str, &[String])>,
) -> Result<(), String> {
    let mut wb = Workbook::new();
    let red = Format::new().set_background_color(Color::RGB(0xFF0000)).set_pattern(FormatPattern::Solid);
    let yellow = Format::new().set_background_color(Color::RGB(0xFFFF00)).set_pattern(FormatPattern::Solid);
    let ws = wb.add_worksheet();
    let e = |x: rust_xlsxwriter::XlsxError| format!("cannot write {}: {x}", path.display());
    for (j, h) in header.iter().enumerate() {
        ws.write_string(0, j as u16, *h).map_err(e)?;
    }
    for (i, row) in rows.iter().enumerate() {
        let r = (i + 1) as u32;
        let fmt = if hl.red.contains(&i) {
            Some(&red)
        } else if hl.yellow.contains(&i) {
            Some(&yellow)
        } else {
            None
        };
        for (j, c) in row.iter().enumerate() {
            let col = j as u16;
            match (c, fmt) {
                (Cell::F(f), Some(fm)) if f.is_finite() => ws.write_number_with_format(r, col, *f, fm).map(|_| ()),
                (Cell::F(f), None) if f.is_finite() => ws.write_number(r, col, *f).map(|_| ()),
                (Cell::I(i), Some(fm)) => ws.write_number_with_format(r, col, *i as f64, fm).map(|_| ()),
                (Cell::I(i), None) => ws.write_number(r, col, *i as f64).map(|_| ()),
                (other, Some(fm)) => ws.write_string_with_format(r, col, xlsx_text(other), fm).map(|_| ()),
                (other, None) => {
                    let t = xlsx_text(other);
                    if t.is_empty() {
                        Ok(())
                    } else {
                        ws.write_string(r, col, t).map(|_| ())
                    }
                }
            }
            .map_err(e)?;
        }
    }
    if let Some((name, lines)) = extra {
        let ws2 = wb.add_worksheet();
        ws2.set_name(name).map_err(e)?;
        for (i, l) in lines.iter().enumerate() {
            ws2.write_string(i as u32, 0, l).map_err(e)?;
        }
    }
    let bytes = wb.save_to_buffer().map_err(e)?;
    write_new(path, &bytes)
}

/// Writes a new file, mode 0640: an existing file or a symbolic link at `path` is an error, never
/// replaced or followed (the caller picks names that do not exist, see `compare::output_names`).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut f = msprobe_core::fsutil::create_new(path).map_err(|x| format!("cannot create {}: {x}", path.display()))?;
    f.write_all(bytes).map_err(|x| format!("cannot write {}: {x}", path.display()))
}

/// Writes the CSV file (numbers in Python's repr, text as the xlsx holds it).
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<Cell>]) -> Result<(), String> {
    let e = |x: csv::Error| format!("cannot write {}: {x}", path.display());
    let f = msprobe_core::fsutil::create_new(path).map_err(|x| format!("cannot create {}: {x}", path.display()))?;
    let mut w = csv::Writer::from_writer(f);
    w.write_record(header).map_err(e)?;
    for row in rows {
        w.write_record(row.iter().map(|c| match c {
            Cell::F(f) if f.is_finite() => c.py_str(),
            other => xlsx_text(other),
        }))
        .map_err(e)?;
    }
    w.flush().map_err(|x| format!("cannot write {}: {x}", path.display()))
}
