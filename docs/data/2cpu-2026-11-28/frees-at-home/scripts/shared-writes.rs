fn main() {
    let n: u64 = 1000;
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let tree = maple::MapleTree::new();
    for i in 0..n { tree.write().store_range(i * 10..=i * 10 + 5, i).unwrap(); }
    let mut x: u64 = 12345;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        for _ in 0..n {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let i = x % n;
            tree.write().erase(i * 10);
            tree.write().store_range(i * 10..=i * 10 + 5, i).unwrap();
        }
    }
    let ops = rounds * n * 2;
    println!("{:.1} ns/op over {} ops", t.elapsed().as_nanos() as f64 / ops as f64, ops);
}
