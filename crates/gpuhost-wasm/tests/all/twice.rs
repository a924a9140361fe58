//! A guest with several linear memories, built from one with a single memory: a component that
//! nests a wasi:cli command component and instantiates it twice — each instance has its own core
//! instances, so its own linear memory, in the one Store — and whose `run` runs both in turn
//! (through a third, small component of its own).
//!
//! Why compose rather than write such a guest: a Rust guest (wasm32-wasip2) has one memory, but a
//! component may hold any number of core modules, each with a memory of its own, and a hostile
//! guest can be built that way. Composing reuses the command's own imports: the outer component
//! copies the command's type, import and alias sections verbatim (so its index spaces start the
//! same) and passes each import on to both instances.

use wasm_encoder::{
    Alias, CanonicalFunctionSection, CodeSection, Component, ComponentAliasSection,
    ComponentExportKind, ComponentExportSection, ComponentImportSection, ComponentInstanceSection,
    ComponentTypeSection, ComponentValType, ExportKind, ExportSection, Function, FunctionSection,
    ImportSection, InstanceSection, Instruction, Module, ModuleArg, ModuleSection,
    NestedComponentSection, RawSection, TypeSection, ValType,
};
use wasmparser::{
    ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef, Parser,
    Payload,
};

/// How many items of each component index space the command's leading sections define.
#[derive(Default)]
struct Counts {
    types: u32,
    funcs: u32,
    instances: u32,
}

impl Counts {
    /// Counts one item of `kind`; panics on a kind no WIT world's imports define up front.
    fn add(&mut self, kind: ComponentExternalKind) -> u32 {
        let n = match kind {
            ComponentExternalKind::Type => &mut self.types,
            ComponentExternalKind::Func => &mut self.funcs,
            ComponentExternalKind::Instance => &mut self.instances,
            other => panic!("a command whose imports define a {other:?}: not composable here"),
        };
        *n += 1;
        *n - 1
    }
}

/// The component export kind of a parsed one.
fn export_kind(kind: ComponentExternalKind) -> ComponentExportKind {
    match kind {
        ComponentExternalKind::Type => ComponentExportKind::Type,
        ComponentExternalKind::Func => ComponentExportKind::Func,
        ComponentExternalKind::Instance => ComponentExportKind::Instance,
        other => panic!("no import of kind {other:?} expected"),
    }
}

/// A component running the wasi:cli command `command` twice, one instance after the other,
/// each instance with its own linear memory; its `run` fails as soon as one instance's does.
pub fn twice(command: &[u8]) -> Vec<u8> {
    let mut outer = Component::new();
    let mut counts = Counts::default();
    // (name, kind, index) of each import, to pass on to both instances.
    let mut imports = Vec::new();
    let mut run = None;
    let mut prefix = true;
    let mut depth = 0;
    for payload in Parser::new(0).parse_all(command) {
        let payload = payload.expect("a valid command component");
        let section = payload.as_section();
        match &payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => {
                prefix = false;
                depth += 1;
                continue;
            }
            Payload::End(_) => {
                depth -= 1;
                continue;
            }
            _ if depth > 0 => continue,
            _ => {}
        }
        match payload {
            Payload::Version { .. } | Payload::CustomSection(_) => continue,
            Payload::ComponentExportSection(exports) => {
                for e in exports {
                    let name = e.unwrap().name.name;
                    if name.starts_with("wasi:cli/run@") {
                        run = Some(name.to_string());
                    }
                }
                continue;
            }
            _ if !prefix => continue,
            Payload::ComponentTypeSection(types) => {
                counts.types += types.count();
            }
            Payload::ComponentImportSection(section) => {
                for i in section {
                    let i = i.unwrap();
                    let kind = match i.ty {
                        ComponentTypeRef::Instance(_) => ComponentExternalKind::Instance,
                        ComponentTypeRef::Func(_) => ComponentExternalKind::Func,
                        ComponentTypeRef::Type(_) => ComponentExternalKind::Type,
                        other => panic!("an import of {other:?}: not composable here"),
                    };
                    let index = counts.add(kind);
                    imports.push((i.name.name.to_string(), export_kind(kind), index));
                }
            }
            Payload::ComponentAliasSection(aliases) => {
                for a in aliases {
                    match a.unwrap() {
                        ComponentAlias::InstanceExport { kind, .. } => {
                            counts.add(kind);
                        }
                        ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::Type,
                            ..
                        } => counts.types += 1,
                        other => panic!("an alias {other:?} before the first module"),
                    }
                }
            }
            // The first definition past the imports: the command's own items start here.
            _ => {
                prefix = false;
                continue;
            }
        }
        let (id, range) = section.expect("a section");
        outer.section(&RawSection {
            id,
            data: &command[range],
        });
    }
    let run = run.expect("the command exports wasi:cli/run");

    // The command, nested once (component 0), instantiated twice with the outer's imports; and
    // the component calling both in turn (component 1). That one is their sibling: a component
    // may not call into its own child instances (wasmtime traps "cannot enter component
    // instance", as the component model's rules against reentrance say).
    outer.section(&RawSection {
        id: wasm_encoder::ComponentSectionId::Component.into(),
        data: command,
    });
    outer.section(&NestedComponentSection(&both_in_turn(&run)));
    let mut instances = ComponentInstanceSection::new();
    for _ in 0..2 {
        instances.instantiate(0, imports.iter().map(|(n, k, i)| (n.as_str(), *k, *i)));
    }
    outer.section(&instances);
    let (a, b) = (counts.instances, counts.instances + 1);
    let mut aliases = ComponentAliasSection::new();
    for instance in [a, b] {
        aliases.alias(Alias::InstanceExport {
            instance,
            kind: ComponentExportKind::Instance,
            name: &run,
        });
    }
    for instance in [b + 1, b + 2] {
        aliases.alias(Alias::InstanceExport {
            instance,
            kind: ComponentExportKind::Func,
            name: "run",
        });
    }
    outer.section(&aliases);
    let (run_a, run_b) = (counts.funcs, counts.funcs + 1);
    let mut instances = ComponentInstanceSection::new();
    instances.instantiate(
        1,
        [
            ("a", ComponentExportKind::Func, run_a),
            ("b", ComponentExportKind::Func, run_b),
        ],
    );
    outer.section(&instances);
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::InstanceExport {
        instance: b + 3,
        kind: ComponentExportKind::Instance,
        name: &run,
    });
    outer.section(&aliases);
    let mut export = ComponentExportSection::new();
    export.export(run.as_str(), ComponentExportKind::Instance, b + 4, None);
    outer.section(&export);
    outer.finish()
}

/// A component importing `a` and `b` (`func() -> result`) and exporting them run in turn as
/// the instance `run` names (a wasi:cli/run): `b` only if `a` succeeded, the last result.
fn both_in_turn(run: &str) -> Component {
    let mut c = Component::new();
    let mut types = ComponentTypeSection::new();
    types.defined_type().result(None, None);
    let no_params: [(&str, ComponentValType); 0] = [];
    types
        .function()
        .params(no_params)
        .result(Some(ComponentValType::Type(0)));
    c.section(&types);
    let mut imports = ComponentImportSection::new();
    imports.import("a", wasm_encoder::ComponentTypeRef::Func(1));
    imports.import("b", wasm_encoder::ComponentTypeRef::Func(1));
    c.section(&imports);
    // `func() -> result` lowers to `() -> i32` (0: ok) and needs no memory.
    let mut lower = CanonicalFunctionSection::new();
    lower.lower(0, []).lower(1, []);
    c.section(&lower);
    c.section(&ModuleSection(&calls_in_turn()));
    let mut core = InstanceSection::new();
    core.export_items([("a", ExportKind::Func, 0), ("b", ExportKind::Func, 1)]);
    core.instantiate(0, [("", ModuleArg::Instance(0))]);
    c.section(&core);
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::CoreInstanceExport {
        instance: 1,
        kind: ExportKind::Func,
        name: "run",
    });
    c.section(&aliases);
    let mut lift = CanonicalFunctionSection::new();
    lift.lift(2, 1, []);
    c.section(&lift);
    let mut exported = ComponentInstanceSection::new();
    exported.export_items([("run", ComponentExportKind::Func, 2)]);
    c.section(&exported);
    let mut export = ComponentExportSection::new();
    export.export(run, ComponentExportKind::Instance, 0, None);
    c.section(&export);
    c
}

/// A core module importing `a` and `b` (`() -> i32`, 0 meaning success) and exporting `run`:
/// calls `a`, then `b` if `a` succeeded, and returns the last result.
fn calls_in_turn() -> Module {
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I32]);
    m.section(&types);
    let mut imports = ImportSection::new();
    imports.import("", "a", wasm_encoder::EntityType::Function(0));
    imports.import("", "b", wasm_encoder::EntityType::Function(0));
    m.section(&imports);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    m.section(&funcs);
    let mut exports = ExportSection::new();
    exports.export("run", ExportKind::Func, 2);
    m.section(&exports);
    let mut body = Function::new([(1, ValType::I32)]);
    body.instruction(&Instruction::Call(0))
        .instruction(&Instruction::LocalTee(0))
        .instruction(&Instruction::If(wasm_encoder::BlockType::Empty))
        .instruction(&Instruction::LocalGet(0))
        .instruction(&Instruction::Return)
        .instruction(&Instruction::End)
        .instruction(&Instruction::Call(1))
        .instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&body);
    m.section(&code);
    m
}
