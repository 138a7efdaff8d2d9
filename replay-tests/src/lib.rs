//! Golden histories replayed against today's workflow code, and whole-system audit and
//! scenario tests.
//!
//! Status: empty. Golden histories are recorded once the HyperShift workflows run end to
//! end (the "Audit and history" issue).
