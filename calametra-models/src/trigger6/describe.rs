//! The Trigger 6's account of its state in a state dump (`calametra replay FILE --at STEP`,
//! `calametra_core::state`): init, readiness, each output's connection, hotplug count, mode,
//! modeset and display, flips pending and shown, DMA, interrupts and refusals. Registered with
//! `describe_model!` (so the model's `Device` impl need not change) and read only through the
//! model's public accessors.

use super::model::{FlipInfo, Trigger6};

fn flip(f: Option<FlipInfo>) -> String {
    match f {
        None => "none".into(),
        Some(f) => format!(
            "#{} fence {} format {:#x} y@{:#x}",
            f.serial, f.fence, f.format, f.y_offset
        ),
    }
}

impl Trigger6 {
    /// The model's state as (name, value) pairs, in a fixed order.
    pub fn describe_fields(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vec![
            ("init".into(), self.init_state().into()),
            ("software ready".into(), self.software_ready().to_string()),
            ("summary".into(), self.state_summary()),
        ];
        for o in 0..2 {
            let p = |k: &str| format!("out{o}.{k}");
            v.push((p("connected"), self.connected(o).to_string()));
            v.push((p("hotplug raised"), self.hotplug_raised(o).to_string()));
            v.push((
                p("mode"),
                match self.mode(o) {
                    Some(t) => format!("{}x{}@{}", t.hactive, t.vactive, t.refresh_hz),
                    None => "none".into(),
                },
            ));
            v.push((
                p("modeset in progress"),
                self.modeset_in_progress(o).to_string(),
            ));
            v.push((p("display enabled"), self.display_enabled(o).to_string()));
            let f = self.flip_state(o);
            v.push((p("flip pending"), flip(f.pending)));
            v.push((p("flip shown"), flip(f.shown)));
        }
        v.push((
            "fences completed".into(),
            match self.completed_fences().last() {
                Some(l) => format!("{} (last {l})", self.completed_fences().len()),
                None => "0".into(),
            },
        ));
        v.push((
            "interrupts pending".into(),
            self.interrupts_pending().to_string(),
        ));
        v.push(("requests refused".into(), self.rejected().len().to_string()));
        v.push((
            "DMA writes refused".into(),
            self.rejected_writes().len().to_string(),
        ));
        v
    }
}

calametra_core::describe_model!(Trigger6, Trigger6::describe_fields);
