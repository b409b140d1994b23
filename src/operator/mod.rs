//! What an operator sees of a run and may do with it, once, for every
//! surface: the view model a run's signals fold into (lanes, the palette,
//! the ledger, capacity, what waits on whom) and the short words every
//! surface says things in. The console draws it; other surfaces (the
//! headless printer, a served page) read the same, so none is a second
//! copy of another's logic. Below every surface, above the projection.

pub mod log;
pub mod model;
pub mod needs;
pub mod words;
