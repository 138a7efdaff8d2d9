//! The HyperShift workflows (DESIGN.md §5): `create_hosted_cluster`, `scale_node_pool`,
//! `destroy_hosted_cluster`, one module each, with the typed activity requests and
//! responses they call.
//!
//! Status: empty. The workflows arrive with the "HyperShift workflows end to end" issue,
//! once the engine can run them; nothing here works yet.
