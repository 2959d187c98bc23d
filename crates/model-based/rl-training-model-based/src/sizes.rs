//! RLlib's `model_size` table for DreamerV3: the paper's sizes XS … XL (its table B) and
//! RLlib's smaller debug sizes nano … XXS.

use serde::{Deserialize, Serialize};

/// A DreamerV3 model size, named as in RLlib's `model_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelSize {
    /// RLlib's smallest debug size.
    #[serde(rename = "nano")]
    Nano,
    /// RLlib debug size.
    #[serde(rename = "micro")]
    Micro,
    /// RLlib debug size.
    #[serde(rename = "mini")]
    Mini,
    /// RLlib debug size.
    XXS,
    /// The paper's smallest (RLlib's default).
    XS,
    /// Small.
    S,
    /// Medium.
    M,
    /// Large.
    L,
    /// Extra large.
    XL,
}

/// The layer sizes a [`ModelSize`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelDims {
    /// Units of every dense layer.
    pub dense_units: usize,
    /// Dense layers of the encoder, decoder, heads, actor and critic.
    pub dense_layers: usize,
    /// GRU state size (the deterministic state `h`).
    pub gru_units: usize,
    /// Categoricals in the stochastic state `z`.
    pub num_categoricals: usize,
    /// Classes of each categorical.
    pub num_classes: usize,
    /// Channel multiplier of the CNN encoder and decoder.
    pub cnn_multiplier: usize,
}

impl ModelSize {
    /// RLlib's sizes for this model size.
    pub fn dims(self) -> ModelDims {
        use ModelSize::*;
        // (dense units, dense layers, GRU units, categoricals = classes, CNN multiplier)
        let (dense_units, dense_layers, gru_units, z, cnn_multiplier) = match self {
            Nano => (16, 1, 16, 4, 2),
            Micro => (32, 1, 32, 8, 4),
            Mini => (64, 1, 64, 16, 8),
            XXS => (128, 1, 128, 32, 16),
            XS => (256, 1, 256, 32, 24),
            S => (512, 2, 512, 32, 32),
            M => (640, 3, 1024, 32, 48),
            L => (768, 4, 2048, 32, 64),
            XL => (1024, 5, 4096, 32, 96),
        };
        ModelDims {
            dense_units,
            dense_layers,
            gru_units,
            num_categoricals: z,
            num_classes: z,
            cnn_multiplier,
        }
    }
}
