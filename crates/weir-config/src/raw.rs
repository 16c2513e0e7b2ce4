//! (stub; implementation follows)
