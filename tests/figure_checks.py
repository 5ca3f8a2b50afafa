"""Layout checks shared by the figure tests: titles, axes, axis labels and legends must not overlap."""

from __future__ import annotations


def boxes_overlap(a, b) -> bool:
    """Whether two matplotlib bounding boxes (display coordinates) share any area."""
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def drawn(fig):
    """Draw ``fig`` on an Agg canvas; its renderer, for measuring text and legend boxes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def assert_no_overlaps(fig, renderer, legends=None) -> None:
    """No two of: each legend (default: the figure's), each axes' title, frame and x label overlap."""
    boxes = [lg.get_window_extent(renderer) for lg in (fig.legends if legends is None else legends)]
    for ax in fig.axes:
        boxes += [ax.title.get_window_extent(renderer), ax.get_window_extent(renderer),
                  ax.xaxis.label.get_window_extent(renderer)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not boxes_overlap(a, b), (a, b)
