//! Test guest importing an interface no gpuhost host provides (`test:alien/probe`): loading it
//! must fail with an error naming that import.

wit_bindgen::generate!({
    inline: "
        package test:alien;
        interface probe { ping: func() -> u32; }
        world alien { import probe; }
    ",
});

fn main() {
    println!("ping {}", test::alien::probe::ping());
}
