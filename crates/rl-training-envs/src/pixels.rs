//! Pixel observations for the image paths (DreamerV3's CNN): a grid world drawn as a 64×64
//! RGB image. `PixelFrozenLake-v1` is FrozenLake-v1 (the same maps, kwargs, dynamics and
//! time limit) whose observation is the picture of the lake instead of the cell index:
//! frozen cells light blue, holes dark blue, the goal green, the agent a red square.

use crate::toy_text::TabularEnv;
use rl_training_core::Space;
use rl_training_core::env::{Env, EnvError, Info, Kwargs, Step};

/// Side of the rendered image.
pub const SIDE: usize = 64;

const FROZEN: [u8; 3] = [180, 220, 255];
const HOLE: [u8; 3] = [20, 40, 120];
const GOAL: [u8; 3] = [60, 200, 60];
const AGENT: [u8; 3] = [220, 40, 40];

/// A grid env (a [`TabularEnv`] with a map, such as FrozenLake) observed as a
/// `[64, 64, 3]` image, pixels in [0, 255].
pub struct PixelGrid {
    inner: TabularEnv,
    id: String,
    obs_space: Space,
    /// The map without the agent, `[64, 64, 3]` row-major.
    background: Vec<f32>,
    /// Pixels per cell.
    cell: usize,
}

impl PixelGrid {
    /// `inner` drawn as an image; its map must fit (at most 16 cells a side, so that a cell
    /// is at least 4 pixels wide).
    pub fn new(inner: TabularEnv, id: &str) -> Result<Self, EnvError> {
        let (nrow, ncol) = (inner.desc.len(), inner.desc[0].len());
        let cell = SIDE / nrow.max(ncol);
        if cell < 4 {
            return Err(EnvError::Make(format!(
                "{id}: a {nrow}×{ncol} map is too large for a {SIDE}×{SIDE} image (at most 16 cells a side)"
            )));
        }
        let mut background = vec![0.0; SIDE * SIDE * 3];
        for (r, row) in inner.desc.iter().enumerate() {
            for (c, &tile) in row.iter().enumerate() {
                let color = match tile {
                    b'H' => HOLE,
                    b'G' => GOAL,
                    _ => FROZEN,
                };
                fill(&mut background, r * cell, c * cell, cell, color);
            }
        }
        Ok(Self {
            inner,
            id: id.to_string(),
            obs_space: Space::uniform_box(0.0, 255.0, &[SIDE, SIDE, 3]),
            background,
            cell,
        })
    }

    /// The image of the current state.
    fn draw(&self, obs: &mut [f32]) {
        obs.copy_from_slice(&self.background);
        let ncol = self.inner.desc[0].len();
        let (r, c) = (self.inner.s() / ncol, self.inner.s() % ncol);
        // The agent: a square inset by a quarter cell, so the tile under it still shows.
        let inset = self.cell / 4;
        let side = self.cell - 2 * inset;
        fill(
            obs,
            r * self.cell + inset,
            c * self.cell + inset,
            side,
            AGENT,
        );
    }
}

/// Paints the `side × side` square at (`top`, `left`) of a `[64, 64, 3]` image.
fn fill(img: &mut [f32], top: usize, left: usize, side: usize, color: [u8; 3]) {
    for y in top..top + side {
        for x in left..left + side {
            let i = (y * SIDE + x) * 3;
            for (k, &v) in color.iter().enumerate() {
                img[i + k] = v as f32;
            }
        }
    }
}

impl Env for PixelGrid {
    fn id(&self) -> &str {
        &self.id
    }
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let mut cell = [0.0];
        let info = self.inner.reset(seed, options, &mut cell)?;
        self.draw(obs);
        Ok(info)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut cell = [0.0];
        let step = self.inner.step(action, &mut cell)?;
        self.draw(obs);
        Ok(step)
    }
    fn state(&self) -> Option<Vec<f64>> {
        self.inner.state()
    }
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        self.inner.set_state(state)
    }
    fn render(&self) -> Option<String> {
        self.inner.render()
    }
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        self.inner.snapshot()
    }
    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        self.inner.restore(snapshot)
    }
}

/// `PixelFrozenLake-v1`: FrozenLake-v1's kwargs (`map_name`, `desc`, `is_slippery`,
/// `success_rate`), observed as a picture.
pub fn pixel_frozen_lake_from_kwargs(kw: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    let lake = crate::toy_text::frozen_lake_env_from_kwargs(kw)?;
    Ok(Box::new(PixelGrid::new(lake, "PixelFrozenLake-v1")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picture_shows_the_map_and_moves_with_the_agent() {
        let mut kw = Kwargs::new();
        kw.insert("is_slippery".into(), false.into());
        let mut env = pixel_frozen_lake_from_kwargs(&kw).unwrap();
        assert_eq!(env.observation_space().image_shape(), Some([64, 64, 3]));
        let mut obs = vec![0.0; 64 * 64 * 3];
        env.reset(Some(0), None, &mut obs).unwrap();
        let px = |o: &[f32], y: usize, x: usize| -> [u8; 3] {
            let i = (y * SIDE + x) * 3;
            [o[i] as u8, o[i + 1] as u8, o[i + 2] as u8]
        };
        // 4×4 map, 16-pixel cells: the agent at the start, a hole at (1, 1), the goal at (3, 3).
        assert_eq!(px(&obs, 8, 8), AGENT);
        assert_eq!(px(&obs, 1, 1), FROZEN);
        assert_eq!(px(&obs, 24, 24), HOLE);
        assert_eq!(px(&obs, 56, 56), GOAL);
        // Right (2): the agent moves one cell over and the start is bare again.
        env.step(&[2.0], &mut obs).unwrap();
        assert_eq!((px(&obs, 8, 8), px(&obs, 8, 24)), (FROZEN, AGENT));
        assert!(obs.iter().all(|&v| (0.0..=255.0).contains(&v)));
        // A snapshot restores the same picture.
        let snap = env.snapshot().unwrap();
        let mut other = pixel_frozen_lake_from_kwargs(&kw).unwrap();
        let mut o2 = vec![0.0; obs.len()];
        other.reset(Some(1), None, &mut o2).unwrap();
        other.restore(&snap).unwrap();
        other.step(&[1.0], &mut o2).unwrap();
        env.step(&[1.0], &mut obs).unwrap();
        assert_eq!(obs, o2);
    }

    #[test]
    fn maps_too_large_to_draw_are_refused_by_name() {
        let mut kw = Kwargs::new();
        kw.insert(
            "desc".into(),
            serde_json::json!(vec!["S".to_string() + &"F".repeat(19); 20]),
        );
        let e = pixel_frozen_lake_from_kwargs(&kw)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("PixelFrozenLake-v1") && e.contains("20×20"),
            "{e}"
        );
    }
}
