//! The repository's own rules, kept true by tests: the layering of `src/` and text that cites
//! nothing a reader lacks.

mod architecture;
mod tidy;
