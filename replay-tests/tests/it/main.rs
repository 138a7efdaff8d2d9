//! Golden histories against today's code (one test binary).

mod altered;
mod golden;
mod patched;
