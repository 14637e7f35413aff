"""The ISA contract: encoding, assembler/disassembler, generated files, program images, layouts."""
import random

import numpy as np
import pytest

from isa import (
    BY_NAME, INSTRUCTIONS, SMALL_CONFIG, DEFAULT_CONFIG, EncodingError, Instruction, decode, decode_program,
    encode, encode_program, make,
)
from isa.asm import AsmError, assemble, disassemble
from isa.instructions import HEADER_FIELDS, INSTR_BITS
from isa.layout import layout_bytes, pack, unpack
from isa.program import Program, ProgramFormatError, Segment, TensorBinding
from isa import generate


def random_instruction(rng: random.Random) -> Instruction:
    defn = rng.choice(INSTRUCTIONS)
    values = {f.name: rng.randint(f.min, f.max) for f in HEADER_FIELDS[1:] + defn.fields}
    return Instruction(defn.name, values)


def test_fields_pack_without_overlap():
    for defn in INSTRUCTIONS:
        layout = defn.layout()
        for (f, lsb), (g, next_lsb) in zip(layout, layout[1:]):
            assert lsb + f.width == next_lsb
        assert defn.used_bits <= INSTR_BITS


def test_encode_decode_round_trip_random():
    rng = random.Random(1)
    for _ in range(2000):
        instr = random_instruction(rng)
        assert decode(encode(instr)) == instr


def test_field_values_checked():
    with pytest.raises(EncodingError, match="does not fit"):
        make("MATMUL", w_zp=128)
    with pytest.raises(EncodingError, match="does not fit"):
        make("DMA_LOAD", len0=-1)
    with pytest.raises(EncodingError, match="no field"):
        make("HALT", len0=1)


def test_decode_rejects_illegal_words():
    with pytest.raises(EncodingError, match="illegal opcode 0"):
        decode(bytes(32))
    word = int.from_bytes(encode(make("HALT")), "little") | (1 << 200)
    with pytest.raises(EncodingError, match="reserved bits"):
        decode(word.to_bytes(32, "little"))
    with pytest.raises(EncodingError, match="multiple"):
        decode_program(bytes(33))


def test_field_bit_positions_match_table():
    # The encoding of one field set to all-ones sits exactly at the table's bit positions.
    for defn in INSTRUCTIONS:
        for f, lsb in defn.layout()[1:]:
            instr = Instruction(defn.name, {f.name: -1 if f.signed else f.max})
            word = int.from_bytes(encode(instr), "little")
            assert word == defn.opcode | (((1 << f.width) - 1) << lsb)


def test_assembler_round_trip_random():
    rng = random.Random(2)
    program = [random_instruction(rng) for _ in range(500)]
    text = disassemble(program)
    assert encode_program(assemble(text)) == encode_program(program)


def test_assembler_syntax_and_errors():
    prog = assemble("""
        # load weights
        DMA_LOAD sram=WSRAM ext_addr=0x40 len0=4 len1=1 len2=1 wait=MXU|VPU  ; trailing comment
        MATMUL n0=3 a_zp=-128 w_zp=127
        HALT
    """)
    assert [i.name for i in prog] == ["DMA_LOAD", "MATMUL", "HALT"]
    assert prog[0].sram == 1 and prog[0].wait == 0b110 and prog[1].a_zp == -128
    for bad, message in [("FOO x=1", "unknown instruction"), ("HALT wait=XYZ", "unknown unit"),
                         ("MATMUL n0", "name=value"), ("MATMUL n0=1 n0=2", "twice"),
                         ("MATMUL n0=z", "not an integer"), ("DMA_LOAD sram=FOO", "unknown value")]:
        with pytest.raises(AsmError, match=message) as e:
            assemble("HALT\n" + bad, source="t.s")
        assert "t.s:2:" in str(e.value)


def test_generated_files_are_current():
    assert generate.main(["--check"]) == 0, "run `python -m isa.generate`"


@pytest.mark.parametrize("shape", [(1, 3, 5, 20), (2, 1, 1, 16), (1, 4, 4, 1)])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_layout_round_trip(shape, dtype):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    for layout in ("brick", "flat"):
        data = pack(a, layout, 16)
        assert len(data) == layout_bytes(a.shape, a.dtype, layout, 16)
        assert np.array_equal(unpack(data, a.shape, a.dtype, layout, 16), a)


def test_brick_layout_places_channels_in_lanes():
    a = np.arange(1 * 2 * 2 * 18, dtype=np.int16).reshape(1, 2, 2, 18).astype(np.int8)
    data = np.frombuffer(pack(a, "brick", 16), dtype=np.int8).reshape(2, 2, 2, 16)  # [cb][h][w][lane]
    assert np.array_equal(data[0, 1, 0], a[0, 1, 0, :16])
    assert np.array_equal(data[1, 1, 1, :2], a[0, 1, 1, 16:])
    assert not data[1, :, :, 2:].any()


def _program():
    return Program(
        config=SMALL_CONFIG, instructions=[make("SYNC", wait=1), make("HALT")], program_addr=0x100,
        segments=[Segment("weights", 0x200, bytes(range(40)))],
        inputs=[TensorBinding("x", (1, 2, 2, 3), "int8", 0x400, "brick")],
        outputs=[TensorBinding("y", (1, 2, 2, 5), "int8", 0x800, "brick")],
        info={"source": "test"},
    )


def test_program_image_round_trip(tmp_path):
    prog = _program()
    path = tmp_path / "p.npuprog"
    prog.save(path)
    back = Program.load(path)
    assert back.to_bytes() == prog.to_bytes()
    assert back.config == SMALL_CONFIG and back.instructions == prog.instructions
    x = np.arange(12, dtype=np.int8).reshape(1, 2, 2, 3)
    mem = back.memory_image({"x": x})
    assert mem[0x200:0x200 + 40] == bytes(range(40))
    assert bytes(mem[0x100:0x100 + 64]) == encode_program(prog.instructions)
    out = back.read_outputs(mem)
    assert out["y"].shape == (1, 2, 2, 5) and not out["y"].any()


def test_program_image_rejects_damage():
    data = _program().to_bytes()
    for bad, message in [(b"garbage" * 4, "bad magic"), (data[:20], "truncated header"),
                         (data[:-10], "truncated"), (data[:8] + b"\x09" + data[9:], "format version")]:
        with pytest.raises(ProgramFormatError, match=message):
            Program.from_bytes(bad, source="p.npuprog")


def test_config_validation():
    with pytest.raises(ValueError, match="positive"):
        type(DEFAULT_CONFIG)(acc_rows=0)
    assert type(DEFAULT_CONFIG).from_dict(DEFAULT_CONFIG.to_dict()) == DEFAULT_CONFIG
    assert sum(DEFAULT_CONFIG.sram_bytes.values()) <= 512 * 1024


def test_loop_assembles_and_round_trips():
    prog = assemble("""
        LOOP count=3 body=2 inc_ext=-0x40 inc_asram=-1 inc_wsram=16 inc_acc=-32768 inc_psram=2047 wait=DMA
        SYNC
        HALT
    """)
    loop = prog[0]
    assert (loop.count, loop.body, loop.inc_ext, loop.inc_asram, loop.inc_acc, loop.inc_psram, loop.wait) == \
        (3, 2, -64, -1, -32768, 2047, 1)
    assert decode(encode(loop)) == loop
    assert encode_program(assemble(disassemble(prog))) == encode_program(prog)
    with pytest.raises(EncodingError, match="does not fit"):
        make("LOOP", inc_psram=2048)
    with pytest.raises(EncodingError, match="does not fit"):
        make("LOOP", body=1 << 12)


def test_address_fields_are_tagged():
    """Every address field names its LOOP space; a DMA's follows its `sram` field, in bus
    words; LOOP has one increment per space."""
    from isa.instructions import LOOP_DEPTH, Space, address_fields, field_space, loop_increments, offset_unit

    # TABLE's t_addr is a TSRAM row: TSRAM is no LOOP address space (tables are installed
    # once and looked up in place), so LOOPs never offset it.
    untagged = {("TABLE", "t_addr")}
    for defn in INSTRUCTIONS:
        tagged = {f.name for f in address_fields(defn)}
        named = {f.name for f in defn.fields if f.name.endswith("_addr") and (defn.name, f.name) not in untagged}
        assert tagged == named, defn.name
    dma = BY_NAME["DMA_LOAD"]
    sram_addr = next(f for f in dma.fields if f.name == "sram_addr")
    assert [field_space(dma, sram_addr, {"sram": s}) for s in range(4)] == \
        [Space.ASRAM, Space.WSRAM, Space.PSRAM, None]
    assert offset_unit(sram_addr, Space.PSRAM, DEFAULT_CONFIG) == DEFAULT_CONFIG.words_per_wide_row
    assert offset_unit(sram_addr, Space.ASRAM, DEFAULT_CONFIG) == 1
    assert sorted(loop_increments()) == sorted(Space) and LOOP_DEPTH == 4
    assert BY_NAME["LOOP"].opcode == 3 and BY_NAME["LOOP"].unit.name == "SEQ"
