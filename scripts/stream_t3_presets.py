#!/usr/bin/env python3
"""Writes presets/arch/stream_t3_<cores>c_<ws>ws.toml: the iso-area systems of Stream's Table 3
(Symons et al., "Stream", Section 6.2): 1, 2, 4 or 8 cores, each weight stationary (WS) or output
stationary (OS), 2^12 PEs (the WS arrays have 72/64 of that: C x FX x FY rows) and 4 MiB of
activation + weight memory in total, a 256-bit core-to-core bus, one 128-bit off-chip port to a
256 MiB DRAM. Run from the repository root: python3 scripts/stream_t3_presets.py"""
import pathlib

# Table 3 per core count: WS (rows, cols, C, K, act MiB, act B/cycle, W MiB, W B/cycle) and
# OS (rows, cols, OX, K, act MiB, act B/cycle, W MiB, W B/cycle). FX = FY = 3 on WS rows.
WS = {1: (72, 64, 8, 64, 2, 72, 2, 128), 2: (36, 64, 4, 64, 1, 36, 1, 128),
      4: (36, 32, 4, 32, 0.5, 36, 0.5, 64), 8: (18, 32, 2, 32, 0.25, 18, 0.25, 64)}
OS = {1: (64, 64, 64, 64, 2, 64, 2, 64), 2: (32, 64, 32, 64, 1, 32, 1, 64),
      4: (32, 32, 32, 32, 0.5, 32, 0.5, 32), 8: (16, 32, 16, 32, 0.25, 16, 0.25, 32)}

# Stream's own 22 nm CACTI figures (stream/inputs/exploration/hardware/memory_pool/
# Stream_journal_exploration.py @ 09a05c8e, the journal's exploration): pJ per access of one
# 128 KiB bank, by bank port width in bits (read, write).
BANK = {32: (12.22, 9.21), 36: (13.19, 10.89), 64: (17.96, 13.38), 128: (26.0, 23.65), 256: (41.54, 45.95)}
BANK_KIB = 128


def bank_energy(width):
    if width in BANK:
        return BANK[width], "pool"
    # A width the pool lacks (72 bits in Table 3; others in the scaled systems): linear in width
    # between the nearest widths it has.
    if width > max(BANK):  # wider than the pool's widest bank: that bank's energy per bit (ganged banks)
        top = max(BANK)
        return tuple(e * width / top for e in BANK[top]), "ganged"
    lo = max(w for w in BANK if w < width)
    hi = min(w for w in BANK if w > width)
    t = (width - lo) / (hi - lo)
    return tuple(BANK[lo][i] + t * (BANK[hi][i] - BANK[lo][i]) for i in range(2)), "interp"


def memory(name, mib, bytes_per_cycle, keeps, fanout=None):
    banks = int(mib * 1024 / BANK_KIB)
    width = bytes_per_cycle * 8 // banks
    (r, w), how = bank_energy(width)
    note = (f"# {banks} banks of 128 KiB, {width} bits each: "
            + (f"{r} / {w} pJ per bank access (pool)" if how == "pool" else
               f"{r:.6g} / {w:.6g} pJ per bank access, DERIVED as {width // max(BANK)} ganged {max(BANK)}-bit banks of "
               "the pool" if how == "ganged" else
               f"{r:.6g} / {w:.6g} pJ per bank access, DERIVED by linear interpolation between the pool's "
               f"{max(x for x in BANK if x < width)}- and {min(x for x in BANK if x > width)}-bit banks "
               f"(the pool has no {width}-bit bank)")
            + f" -> x 8 / {width} per byte")
    s = f"\n[[core.level]]\n{note}\nname = \"{name}\"\nsize_kb = {int(mib * 1024)}\nword_bits = 8\n"
    s += f"read_bandwidth = {bytes_per_cycle}\nwrite_bandwidth = {bytes_per_cycle}\n"
    s += f"read_pj = {r * 8 / width!r}\nwrite_pj = {w * 8 / width!r}\nkeeps = {keeps}\n"
    if fanout:
        s += f"fanout = {fanout}\n"
    return s


# Registers: the pool's smallest (reg_64B_1r1w_8b, 0.06 pJ per byte) for the 4 B PE register, its
# 256 B two-port 16-bit register (0.258 / 0.356 pJ per 16 bits) for the 128 B output registers:
# both DERIVED as the nearest pool entry at or above the size (upper bounds).
PE_REG = "read_pj = 0.06\nwrite_pj = 0.06\n"
OUT_REG = "read_pj = 0.129\nwrite_pj = 0.178\n"

K_AXIS = '["K", "N"], {a}_reuse = ["input"]'


def core_head(kind, count, k, amib, abw, wmib, wbw):
    """The [[core]] table, MAC, and the weight and activation memories (K on the columns)."""
    s = f"\n[[core]]\nname = \"{kind}\"\ncount = {count}\nruns = [\"mac\"]\n"
    s += "\n[core.compute]\nname = \"MAC\"\nenergy_pj = 0.04\n"
    s += memory("W_mem", wmib, wbw, '["weight"]')
    s += memory("Act_mem", amib, abw, '["input", "output"]',
                f'{{ x = {k}, x_ranks = ["K", "N"], x_reuse = ["input"] }}')
    return s


def register(name, comment, size_bytes, energies, keeps, fanout=None):
    s = f"\n[[core.level]]\nname = \"{name}\"  # {comment}\nsize_bytes = {size_bytes}\nword_bits = 8\n"
    s += energies + f"keeps = {keeps}\n"
    return s + (f"fanout = {fanout}\n" if fanout else "")


def ws_core(n, count):
    rows, cols, c, k, amib, abw, wmib, wbw = WS[n]
    s = core_head("ws", count, k, amib, abw, wmib, wbw)
    s += register("col_out_reg", "128 B of partial sums per column", 128, OUT_REG, '["output"]',
                  f'{{ x = {c}, x_ranks = ["C", "K"], x_reuse = ["output"], y = 3, y_ranks = ["S"], y_reuse = ["output"] }}')
    s += ("\n[[core.level]]\nname = \"row_fy\"  # no storage: the FY share of the rows (C x FX x FY = "
          f"{c} x 3 x 3 = {rows})\nentries = 1\nword_bits = 8\nkeeps = []\n"
          'fanout = { x = 3, x_ranks = ["R"], x_reuse = ["output"] }\n')
    return s + register("pe_reg", "4 B per PE: the stationary weight", 4, PE_REG, '["weight"]')


def os_core(n, count):
    rows, cols, ox, k, amib, abw, wmib, wbw = OS[n]
    s = core_head("os", count, k, amib, abw, wmib, wbw)
    s += register("out_buf", "output local buffer: 128 B per column", 128, OUT_REG, '["output"]',
                  f'{{ y = {ox}, y_ranks = ["Q", "M"], y_reuse = ["weight"] }}')
    return s + register("pe_reg", "4 B per PE: the stationary output", 4, PE_REG, '["output"]')


def system(n, ws):
    name = f"stream_t3_{n}c_{ws}ws"
    s = f"""# Generated by scripts/stream_t3_presets.py; do not edit by hand.
# Stream (Symons et al.) Table 3: {n} core(s), {ws} weight stationary and {n - ws} output stationary, the
# iso-area systems of Section 6.2 (2^12 PEs, 4 MiB of activation + weight memory in total; the WS
# arrays have C x FX x FY = 72/64 times as many rows as 2^12 allows, as in the table). Sizes,
# bandwidths and dataflows are the table's. Energies are what Stream ships: MAC 0.04 pJ (its
# tpu_like core and exploration cores), memories from its 22 nm CACTI pool (see each level),
# DRAM 650 pJ per 64-bit access (the pool's dram_sp) = 81.25 pJ per byte; core-to-core bus and
# off-chip port at 0 pJ as in every Stream hardware file (the paper gives no link energy).
name = "{name}"
description = "Stream Table 3: {n} core(s), {ws} WS + {n - ws} OS, 256-bit bus, 128-bit port to 256 MiB DRAM"

[offchip]
name = "DRAM"
size_kb = {256 * 1024}
word_bits = 8
shared_bandwidth = 16   # the 128-bit port, in bytes per cycle
energy_pj = 81.25

[[offchip.port]]
bits_per_cycle = 128
"""
    if ws:
        s += ws_core(n, ws)
    if n - ws:
        s += os_core(n, n - ws)
    if n > 1:
        s += "\n[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 256\n"
    return name, s


# Stream's exploration systems (stream/inputs/exploration/hardware/HW*.py @ 258f5310, the paper's
# era) put a pooling core and a SIMD core beside the MAC cores, and its mapping sends pools there
# and additions (and every other element-wise layer) to the SIMD core: Table 3's MAC-only cores
# cannot run ResNet-18's pools and additions or MobileNetV2's additions. The "_ps" systems add the
# two (cores/pooling.py: 3 x 3 pooling units at 0.1 pJ, a 256 KiB 1r1w memory of two 36-bit
# 128 KiB banks; cores/simd.py: 32 adders at 0.01 pJ, 256 KiB of two 256-bit banks; energies
# from the same pool) on the same bus.
SPECIAL = """
[[core]]
name = "pooling"
runs = ["pool"]

[core.compute]
name = "pool_unit"  # cores/pooling.py: 3 x 3 units, 0.1 pJ per operation
energy_pj = 0.1

[[core.level]]
# sram_256KB_2_128KB_1r1w_36b: 2 x 13.19 / 2 x 10.89 pJ per 72-bit access -> x 8 / 72 per byte
name = "pool_mem"
size_kb = 256
word_bits = 8
read_bandwidth = 9
write_bandwidth = 9
read_pj = {pr!r}
write_pj = {pw!r}
keeps = ["weight", "input", "output"]
fanout = {{ x = 3, y = 3, x_ranks = ["S"], y_ranks = ["R"], x_reuse = ["output"], y_reuse = ["output"] }}

[[core]]
name = "simd"
runs = ["elementwise", "softmax", "copy"]

[core.compute]
name = "add_unit"  # cores/simd.py: 32 adders, 0.01 pJ per operation
energy_pj = 0.01

[[core.level]]
# sram_256KB_2_128KB_1r1w_256b: 2 x 41.54 / 2 x 45.95 pJ per 512-bit access -> x 8 / 512 per byte
name = "simd_mem"
size_kb = 256
word_bits = 8
read_bandwidth = 64
write_bandwidth = 64
read_pj = {sr!r}
write_pj = {sw!r}
keeps = ["weight", "input", "output"]
fanout = {{ x = 32, x_ranks = ["C"] }}
""".format(pr=2 * 13.19 * 8 / 72, pw=2 * 10.89 * 8 / 72, sr=2 * 41.54 * 8 / 512, sw=2 * 45.95 * 8 / 512)


def scaled_tables(pes):
    """Table 3's rules at a PE budget of `pes` (Fig. 16: 2^14, 2^16): per core pes / n PEs, K on
    as many columns as keep the array as square as possible (columns >= rows, powers of two), WS
    rows C x FX x FY with C = rows / 8 (72/64 of the budget, as in the table), OS rows OX; the
    activation port one byte per row, the weight port 2 (WS) or 1 (OS) byte per column, 4 MiB of
    activation + weight memory in total as in Table 3 (the paper gives no memory for the larger
    budgets). At 2^12 these rules give Table 3 itself (checked below)."""
    ws, os_ = {}, {}
    for n in (1, 2, 4, 8):
        per = pes // n
        cols = 1 << ((per.bit_length() - 1 + 1) // 2)
        rows = per // cols
        mib = 2 / n
        ws[n] = (rows * 9 // 8, cols, rows // 8, cols, mib, rows * 9 // 8, mib, 2 * cols)
        os_[n] = (rows, cols, rows, cols, mib, rows, mib, cols)
    return ws, os_


assert scaled_tables(1 << 12) == (WS, OS), scaled_tables(1 << 12)


def variant(n, ws, pes):
    """A `_ps` system (with the pooling and SIMD cores) at a PE budget."""
    global WS, OS
    saved = WS, OS
    WS, OS = scaled_tables(pes)
    try:
        name, text = system(n, ws)
    finally:
        WS, OS = saved
    budget = "" if pes == 1 << 12 else f"_pe{pes.bit_length() - 1}"
    new = name.replace("stream_t3_", f"stream_t3{budget}_") + "_ps"
    text = text.replace(f'name = "{name}"', f'name = "{new}"', 1)
    text = text.replace("# Generated by scripts/stream_t3_presets.py; do not edit by hand.\n",
                        "# Generated by scripts/stream_t3_presets.py; do not edit by hand. With Stream's exploration\n"
                        f"# pooling and SIMD cores (the script's SPECIAL) and 2^{pes.bit_length() - 1} PEs"
                        + (" (scaled_tables)" if budget else "") + ".\n", 1)
    if pes != 1 << 12:
        text = text.replace("2^12 PEs, 4 MiB", f"here 2^{pes.bit_length() - 1} PEs, 4 MiB", 1)
    cut = text.find("\n[topology]")
    if cut < 0:
        text += SPECIAL + '\n[topology]\nkind = "bus"\nlink_bits_per_cycle = 256\n'
    else:
        text = text[:cut] + "\n" + SPECIAL + text[cut:]
    return new, text


out = pathlib.Path("presets/arch")
for n in (1, 2, 4, 8):
    for ws in range(n + 1):
        name, text = system(n, ws)
        (out / f"{name}.toml").write_text(text)

# The studies' systems (experiments/stream_fig1[3-6].toml): not presets, files beside the studies.
studies = pathlib.Path("experiments/stream_arch")
studies.mkdir(exist_ok=True)
for pes in (1 << 12, 1 << 14, 1 << 16):
    for n in (1, 2, 4, 8):
        for ws in range(n + 1):
            name, text = variant(n, ws, pes)
            (studies / f"{name}.toml").write_text(text)
