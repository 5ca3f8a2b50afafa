"""``tilesim hardware list|show``: the GPU catalog with the source of every value."""

from __future__ import annotations

import sys

import click
from rich.table import Table
from rich.text import Text

from tilesim import hardware as hw_catalog
from tilesim.cli.base import (
    cli,
    console,
    fail,
)

# ----------------------------------------------------------------------------------------------
# hardware


@cli.group("hardware")
def hardware_group() -> None:
    """The GPU catalog (datasheet values, each with its source; calibrated profiles applied)."""


@hardware_group.command("list")
def hardware_list() -> None:
    """One line per GPU in the catalog."""
    tab = Table(title="hardware catalog")
    for col in ("name", "display name", "SMs", "clock GHz", "FP32 TFLOP/s", "HBM TB/s", "L2 MiB", "calibrated"):
        tab.add_column(col, justify="left" if col in ("name", "display name", "calibrated") else "right")
    broken = []
    for name in hw_catalog.available():
        try:
            hw = hw_catalog.load(name)
        except (ValueError, OSError, TypeError, KeyError) as e:  # a malformed file: one line, the rest listed
            broken.append(f"{name}: {' '.join(str(e).split())}")
            continue
        except Exception as e:  # tomllib.TOMLDecodeError is a ValueError; anything else still one line
            broken.append(f"{name}: {type(e).__name__}: {' '.join(str(e).split())}")
            continue
        cal = f"yes ({hw.calibration_date or 'undated'})" if hw.calibrated else "no"
        l2 = f"{hw.l2_bytes / 2**20:.0f}" if hw.has("l2_bytes") else "-"  # a value the GPU's file cannot source
        l2 += " (assumed)" if hw.is_assumed("l2_bytes") else ""
        tab.add_row(hw.name, hw.display_name, str(hw.sm_count), f"{hw.sm_clock_hz / 1e9:.2f}",
                    f"{hw.fp32_flops_per_s / 1e12:.1f}", f"{hw.hbm_bytes_per_s / 1e12:.2f}", l2, cal)
    console().print(tab)
    for line in broken:
        click.echo(f"error: cannot read hardware file {line}", err=True)
    if broken:
        sys.exit(1)


def _human(field: str, v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return ""
    if field.endswith("_hz"):
        return f"{v / 1e9:.3f} GHz"
    if field.endswith("bytes_per_s"):
        return f"{v / 1e12:.3f} TB/s"
    if field.endswith("flops_per_s"):
        return f"{v / 1e12:.1f} TFLOP/s"
    if field.endswith("_bytes") and v >= 1024:
        return f"{v / 2**10:,.0f} KiB" if v < 2**20 else f"{v / 2**20:,.1f} MiB" if v < 2**30 else f"{v / 2**30:,.1f} GiB"
    if field.endswith("_s"):
        return f"{v * 1e6:.2f} µs"
    return ""


@hardware_group.command("show")
@click.argument("name")
@click.option("--sources", is_flag=True, help="also print where each value comes from")
def hardware_show(name, sources) -> None:
    """Every field of GPU NAME (field names carry the unit; * marks calibrated values, a assumed ones)."""
    try:
        hw = hw_catalog.load(name)
    except ValueError as e:
        fail(str(e))
    con = console()
    cal = (f"calibrated {len(hw.calibrated)} field(s) on {hw.calibration_date or 'an unknown date'}"
           if hw.calibrated else "not calibrated (datasheet values)")
    if hw.assumed:
        cal += f"; {len(hw.assumed)} assumed value(s), marked a (no source gives them: tilesim/hardware/assumed/)"
    con.print(f"[bold]{hw.display_name}[/bold] ({hw.name}, {hw.vendor}): {cal}")
    tab = Table()
    tab.add_column("field")
    tab.add_column("value", justify="right")
    tab.add_column("", justify="right")
    tab.add_column("cal", justify="center")
    if sources:
        tab.add_column("source", overflow="fold")
    for f in hw.fields():  # what this GPU has (an Apple GPU has no NVIDIA-only field)
        v = hw.get(f)
        mark = "*" if f in hw.calibrated else "a" if hw.is_assumed(f) else ""
        row = [f, f"{v:g}" if isinstance(v, float) else str(v), _human(f, v), mark]
        if sources:
            row.append(Text(hw.source_of(f)))
        tab.add_row(*row)
    derived = [("fp32_flops_per_s", hw.fp32_flops_per_s)]
    if hw.has("smem_banks") and hw.has("smem_bank_width_bytes"):
        derived.append(("smem_bytes_per_clk_per_sm", hw.smem_bytes_per_clk_per_sm))
    for f, v in derived:
        row = [f, f"{v:g}", _human(f, v), ""]
        if sources:
            row.append("derived")
        tab.add_row(*row, style="dim")
    con.print(tab)
