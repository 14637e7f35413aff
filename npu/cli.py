"""The `npu` command line: one entry point for every user-facing flow (run, compile, estimate,
conformance, board).

Exit codes: 0 success, 2 invalid input (unreadable/malformed file, illegal graph), 3 well-formed
but unsupported input.  User errors print one line to stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
import time
from pathlib import Path

import numpy as np

from npu import conformance
from npu.config import load_config as _load_config
from npu.output import write_file, write_text
from tosa_ir.errors import InvalidInput, NpuError

BACKENDS = ("ref", "isa", "rtl")


def _add_calibrate_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibrate", metavar="DIR|NPZ",
                   help="float models: calibration inputs for post-training int8 quantization "
                        "(an .npz with a leading sample axis, or a folder of .npz/.npy samples)")


def _add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, metavar="NAME|FILE.json",
                   help="hardware configuration: 'default' (16x16), 'small' (4x4), 'array8', "
                        "'array32', 'array64' (NxN array, bus and memories scaled) or a JSON file "
                        "of NpuConfig fields (default: a program's own, else 'default'); a program "
                        "compiled for another configuration is refused")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npu", description="tosa-npu: run, compile and simulate neural networks on an open NPU.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a model or compiled program on a backend",
                         description="Run MODEL (a model file or a compiled program) and save its outputs. "
                                     "Backends: ref (TOSA reference interpreter, the golden answer), "
                                     "isa (ISA simulator of the NPU), rtl (the RTL under Verilator).")
    run.add_argument("model", metavar="MODEL", help="model file (.tosa, ...) or compiled program (.npuprog)")
    run.add_argument("--backend", choices=BACKENDS, default="ref", help="where to run (default: %(default)s)")
    run.add_argument("--inputs", metavar="IN.npz", required=True,
                     help="inputs keyed by graph input name (one array under any key for a single-input graph)")
    run.add_argument("--output", metavar="OUT.npz", required=True, help="where to save outputs, keyed by output name")
    run.add_argument("--waves", metavar="FILE.fst", help="rtl backend: dump an FST waveform")
    run.add_argument("--max-cycles", type=int, metavar="N",
                     help="isa/rtl: stop the NPU with WATCHDOG after N cycles (default: the compiler's "
                          "cycle estimate plus a margin)")
    _add_calibrate_arg(run)
    _add_config_arg(run)

    comp = sub.add_parser("compile", help="compile a model to an NPU program image",
                          description="Compile MODEL to a program image for the NPU.")
    comp.add_argument("model", metavar="MODEL", help="model file (.tosa, ...)")
    comp.add_argument("-o", "--output", metavar="PROGRAM", required=True, help="program image to write (.npuprog)")
    comp.add_argument("--asm", metavar="FILE.s", help="also write the program's disassembly")
    _add_calibrate_arg(comp)
    _add_config_arg(comp)

    est = sub.add_parser("estimate", help="per-layer cycle estimate of a model, compiler only",
                         description="Compile MODEL and print its per-layer cycle estimate: MACs, cycles, "
                                     "utilisation of the MAC array, external bytes, the roofline bound and "
                                     "cycles/bound. Static: nothing is simulated. See PERFORMANCE.md.")
    est.add_argument("model", metavar="MODEL", help="model file (.tosa, .tflite, ...)")
    est.add_argument("--per-layer", action="store_true",
                     help="compile every compute layer on its own (for graphs that do not compile whole)")
    est.add_argument("--csv", metavar="OUT.csv", help="also write the table as CSV")
    est.add_argument("--plot", metavar="OUT.svg", help="also write a per-layer bar chart (SVG, cycles vs bound)")
    _add_calibrate_arg(est)
    _add_config_arg(est)
    from npu import sweep

    sweep.add_arguments(est)
    conformance.add_parser(sub)
    _add_board_parser(sub)
    return parser


def _add_board_parser(sub) -> None:
    board = sub.add_parser("board", help="run a model on an FPGA board through its UART bridge",
                           description="Talk to an NPU on an FPGA board through the UART bridge "
                                       "(hw/board/protocol.py) with the C driver (firmware/).")
    bsub = board.add_subparsers(dest="board_command", metavar="ACTION", required=True)

    def link_args(p):
        p.add_argument("--port", required=True, metavar="PORT", help="serial port, e.g. /dev/ttyUSB0")
        p.add_argument("--baud", type=int, default=115200, metavar="N",
                       help="bits per second, 8N1 (default: %(default)s)")
        p.add_argument("--timeout", type=float, default=1.0, metavar="S",
                       help="seconds a reply may take beyond its time on the wire; a request "
                            "without a reply is sent again 3 times (default: %(default)s)")

    run = bsub.add_parser("run", help="run a model or compiled program on the board",
                          description="Run MODEL on the board: check HW_ID/HW_CONFIG, load the image "
                                      "and the inputs, start, wait, report status and cycles, save the outputs.")
    run.add_argument("model", metavar="MODEL", help="model file (.tosa, ...) or compiled program (.npuprog)")
    run.add_argument("--inputs", metavar="IN.npz", required=True,
                     help="inputs keyed by graph input name (one array under any key for a single-input graph)")
    run.add_argument("--output", metavar="OUT.npz", required=True, help="where to save outputs, keyed by output name")
    run.add_argument("--max-cycles", type=int, metavar="N",
                     help="stop the NPU with WATCHDOG after N cycles (default: the compiler's "
                          "cycle estimate plus a margin)")
    link_args(run)
    _add_calibrate_arg(run)
    _add_config_arg(run)
    ping = bsub.add_parser("ping", help="check that the bridge answers; print the NPU's HW_ID and HW_CONFIG",
                           description="PING the board's bridge and read the NPU's identification registers.")
    link_args(ping)


def _check_writable(*paths: str | None) -> None:
    """Fail before the (possibly long) work if an output cannot be written."""
    import os

    for path in paths:
        if path is None:
            continue
        parent = Path(path).parent
        if Path(path).is_dir():
            raise InvalidInput(f"{path}: is a folder; cannot write output there")
        if not parent.is_dir() or not os.access(parent, os.W_OK) or (
                Path(path).exists() and not os.access(path, os.W_OK)):
            raise InvalidInput(f"{path}: cannot write output (no such folder or no permission)")


def _print_summary(backend: str, inputs: dict, outputs: dict, seconds: float, stats: dict | None) -> None:
    def shapes(d):
        return ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in d.items())

    print(f"backend: {backend}")
    print(f"inputs:  {shapes(inputs)}")
    print(f"outputs: {shapes(outputs)}")
    print(f"time:    {seconds:.3f} s")
    if stats:
        print(f"cycles:  {stats['cycles']}")
        for unit, busy in stats.get("busy", {}).items():
            share = 100.0 * busy / stats["cycles"] if stats["cycles"] else 0.0
            print(f"  {unit} busy {busy} cycles ({share:.1f}%)")


def cmd_run(args) -> int:
    from npu import backends

    _check_writable(args.output, args.waves)
    if args.max_cycles is not None and args.max_cycles <= 0:
        raise InvalidInput(f"--max-cycles {args.max_cycles}: must be a positive number of cycles")
    model = backends.load_model(args.model, calibrate=args.calibrate)
    if model.program is not None and args.config is None:
        config = model.program.config       # an image names its configuration
    else:
        config = _load_config(args.config)
    inputs = backends.load_inputs(args.inputs, model)
    if model.quantized is not None:
        from npu.calibration import quantize_inputs

        inputs = quantize_inputs(model.quantized, inputs)
    start = time.perf_counter()
    outputs, stats = backends.run(model, inputs, args.backend, config=config, waves=args.waves,
                                  max_cycles=args.max_cycles)
    seconds = time.perf_counter() - start
    saved = dict(outputs)
    if model.quantized is not None:
        from npu.calibration import dequantize_outputs

        saved.update(dequantize_outputs(model.quantized, outputs))
    write_file(args.output, lambda p: np.savez(p, **saved), "outputs")
    _print_summary(args.backend, inputs, outputs, seconds, stats)
    return 0


def cmd_board(args) -> int:
    from npu import backends, board

    if args.board_command == "ping":
        info = board.ping(args.port, args.baud, args.timeout)
        print(f"{args.port}: bridge 0x{info['board_id']:08X}, round trip {1000 * info['round_trip']:.1f} ms")
        print(f"HW_ID     0x{info['HW_ID']:08X}")
        print(f"HW_CONFIG 0x{info['HW_CONFIG']:08X} ({board.describe_hw_config(info['HW_CONFIG'])})")
        return 0
    _check_writable(args.output)
    if args.max_cycles is not None and args.max_cycles <= 0:
        raise InvalidInput(f"--max-cycles {args.max_cycles}: must be a positive number of cycles")
    model = backends.load_model(args.model, calibrate=args.calibrate)
    if model.program is not None and args.config is None:
        config = model.program.config
    else:
        config = _load_config(args.config)
    inputs = backends.load_inputs(args.inputs, model)
    if model.quantized is not None:
        from npu.calibration import quantize_inputs

        inputs = quantize_inputs(model.quantized, inputs)
    program = backends.compile_model(model, config)
    program = backends.check_program(program, config, inputs, model.source)
    limit = args.max_cycles if args.max_cycles is not None else backends.default_max_cycles(program)
    start = time.perf_counter()
    result = board.run_on_board(program, inputs, args.port, limit, args.baud, args.timeout, source=model.source)
    seconds = time.perf_counter() - start
    saved = dict(result.outputs)
    if model.quantized is not None:
        from npu.calibration import dequantize_outputs

        saved.update(dequantize_outputs(model.quantized, result.outputs))
    write_file(args.output, lambda p: np.savez(p, **saved), "outputs")
    _print_summary(f"board ({args.port})", inputs, result.outputs, seconds,
                   {"cycles": result.cycles, "busy": result.busy})
    print(f"status:  DONE at instruction {result.stop_pc}; {result.requests} frames, "
          f"{result.retries} retried")
    return 0


def cmd_compile(args) -> int:
    from npu import backends

    _check_writable(args.output, args.asm)
    config = _load_config(args.config)
    model = backends.load_model(args.model, calibrate=args.calibrate)
    program = backends.compile_model(model, config)
    write_file(args.output, program.save, "the program image")
    if args.asm:
        from isa.asm import disassemble

        text = disassemble(program.instructions)
        write_text(args.asm, text, "the disassembly")
    print(f"wrote {args.output}: {len(program.instructions)} instructions, "
          f"{program.memory_extent()} bytes of external memory, for a "
          f"{config.array_rows}x{config.array_cols} NPU")
    return 0


def cmd_estimate(args) -> int:
    from compiler.estimate import estimate_graph
    from compiler.estimate import layers as estimate
    from npu import backends

    if args.sweep:
        from npu.sweep import run_sweep

        return run_sweep(args)
    _check_writable(args.csv, args.plot)
    config = _load_config(args.config)
    model = backends.load_model(args.model, calibrate=args.calibrate)
    if model.graph is None:
        raise InvalidInput(f"{args.model}: a compiled program has no layers to estimate; give the model file")
    shape = f"{config.array_rows}x{config.array_cols}"
    if args.per_layer:
        rows = estimate.report_rows(estimate.estimate_layers(model.graph, config), config)
        rows.append(estimate.report_total([r for r in rows if r.cycles], config))
        title = (f"each layer compiled alone; {shape} array, {config.macs_per_cycle} MACs/cycle, "
                 f"{config.bus_bytes} B/cycle external bus, instruction memory {config.imem_rows}")
        print(estimate.render_rows(title, rows, "compiles"))
    else:
        from tosa_ir.errors import Unsupported

        try:
            est = estimate_graph(model.graph, config)
        except Unsupported as e:
            # Most of such a graph usually compiles: say how to see those layers.
            raise Unsupported(f"{e} (--per-layer estimates the layers that compile)") from None
        rows, title = est.rows(), f"cycles from {est.source}; {shape} array"
        print(est.table())
    if args.csv:
        write_text(args.csv, estimate.rows_csv(rows), "the CSV table")
        print(f"wrote {args.csv}")
    if args.plot:
        name = Path(args.model.rstrip("/")).name
        svg = estimate.rows_svg(f"{name}: per-layer cycles vs roofline bound", rows, title)
        write_text(args.plot, svg, "the plot")
        print(f"wrote {args.plot}")
    return 0


COMMANDS = {"run": cmd_run, "compile": cmd_compile, "estimate": cmd_estimate, "conformance": conformance.run,
            "board": cmd_board}


@contextlib.contextmanager
def _quiet():
    """No stray warning lines: numpy's RuntimeWarnings (overflow in the integer arithmetic the
    TOSA pseudocode defines, invalid values in float calibration) and library warnings are
    not the user's errors; real problems are raised as NpuError and printed as one line."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        with _quiet():
            return COMMANDS[args.command](args)
    except NpuError as e:
        # One line, whatever the message (tarfile and numpy write several).
        text = " ".join(str(e).split("\n")).strip()
        print(f"npu {args.command}: error: {text}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"npu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
