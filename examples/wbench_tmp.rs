use msprobe::config::{Config, Task};
use msprobe::dtype::DType;
use msprobe::record::TensorRef;
use msprobe::recorder::Recorder;
use msprobe::tensorfile::FileFormat;
use std::time::Instant;
fn main() {
    let n = 64 << 20; let chunk = 4 << 20; let count = n / chunk;
    let src = vec![1u8; n];
    for k in 0..3 {
        let cfg = Config { task: Task::Tensor, dump_path: format!("/tmp/wb/d{k}").into(), file_format: Some(FileFormat::Npy), ..Config::default() };
        let rec = Recorder::new(cfg); rec.start();
        let t0 = Instant::now();
        let shape = [(chunk / 4) as i64];
        for i in 0..count {
            let mut b = rec.begin(&format!("Torch.add.{i}.forward")).unwrap();
            b.section("input_args").unwrap();
            let t = TensorRef { dtype: DType::F32, shape: &shape, data: &src[i * chunk..(i + 1) * chunk], requires_grad: Some(false), type_name: None };
            b.add_tensor(None, &t, rec.budget()).unwrap();
            rec.end(b);
        }
        let t1 = t0.elapsed();
        rec.finish();
        let t2 = t0.elapsed();
        let t3 = Instant::now();
        for i in 0..count { std::fs::write(format!("/tmp/wb/p{k}_{i}"), &src[i*chunk..(i+1)*chunk]).unwrap(); }
        println!("caller {:?} total {:?} plain {:?}", t1, t2, t3.elapsed());
    }
}
