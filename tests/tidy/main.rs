//! The repository's own rules, kept true by tests: the layering of `src/`, text that cites
//! nothing a reader lacks, and a README that stays a front door into the guide.

mod architecture;
mod docs;
mod tidy;
