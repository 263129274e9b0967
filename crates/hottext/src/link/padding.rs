//! Whether the hot range ends on a 2 MiB boundary: what makes a small hot range mappable.
//!
//! The runtime maps the hot range's pages rounded out to whole 2 MiB pages, but only where the
//! text mapping has room: a page reaching past the end of the text would replace whatever
//! follows it. A program whose hot range is followed by less text than it takes to fill the
//! range's last 2 MiB page therefore loses that page, and one with under 2 MiB of hot text and
//! little cold text (nginx: 127 KiB of hot code) gets no huge page at all (`RANGE_TOO_SMALL`).
//! Padding `__hot_end` to the next 2 MiB boundary makes the last page whole whatever follows,
//! for as many bytes of file size as the padding holds (the cold text moves up by as much).
//!
//! [`Padding::Auto`], the default, pads exactly when the binary's text would not fill the last
//! page: without padding the page is lost; with it the cost is under 2 MiB of file (and of
//! page cache, which a mapped huge page holds whole anyway). When the text would fill the
//! page, padding buys nothing and is left out.

use serde::Serialize;

use crate::binary::HUGE_PAGE;

/// When to pad the hot range to whole 2 MiB pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Padding {
    /// When the text after the hot range would not fill its last 2 MiB page (always when that
    /// text is not known).
    #[default]
    Auto,
    /// Always: the range ends on a 2 MiB boundary.
    Always,
    /// Never: a range followed by too little text loses its last huge page.
    Never,
}

/// What padding does for one hot range: whether it is padded, what that costs and gains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PaddingPlan {
    /// Whether the range ends on a 2 MiB boundary.
    pub padded: bool,
    /// Bytes of padding after the last hot function: the file grows by as much.
    pub bytes: u64,
    /// 2 MiB pages the runtime can map when the range is padded (by the planned hot bytes).
    pub huge_pages_padded: u64,
    /// The same without padding; `None` when the text after the range is not known.
    pub huge_pages_unpadded: Option<u64>,
}

/// Plans the padding of a hot range of `hot_bytes` under `policy`. `text_bytes` is the code of
/// the binary being ordered (all of it ends up at or after `__hot_start`: the hot range goes
/// before the rest of the text), `None` without a binary.
pub(crate) fn plan_padding(
    policy: Padding,
    hot_bytes: u64,
    text_bytes: Option<u64>,
) -> PaddingPlan {
    // An empty range (a build without a profile) has no page to make whole.
    let whole = hot_bytes.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    // Without padding, the runtime's pages end where the text does, rounded down.
    let unpadded = text_bytes.map(|text| whole.min(text / HUGE_PAGE * HUGE_PAGE) / HUGE_PAGE);
    let padded = match policy {
        Padding::Always => true,
        Padding::Never => false,
        Padding::Auto => whole > 0 && unpadded.is_none_or(|pages| pages * HUGE_PAGE < whole),
    };
    PaddingPlan {
        padded,
        bytes: if padded {
            whole - hot_bytes.min(whole)
        } else {
            0
        },
        huge_pages_padded: whole / HUGE_PAGE,
        huge_pages_unpadded: unpadded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: u64 = 1024;
    const MB: u64 = 1024 * KB;

    #[test]
    fn auto_pads_a_small_range_with_little_text_after_it() {
        // nginx's case: 127 KiB hot, 1 MiB of text.
        let plan = plan_padding(Padding::Auto, 127 * KB, Some(MB));
        assert!(plan.padded);
        assert_eq!(plan.bytes, 2 * MB - 127 * KB);
        assert_eq!(
            (plan.huge_pages_padded, plan.huge_pages_unpadded),
            (1, Some(0))
        );
    }

    #[test]
    fn auto_leaves_a_range_alone_when_the_text_fills_its_last_page() {
        let plan = plan_padding(Padding::Auto, 3 * MB, Some(40 * MB));
        assert!(!plan.padded);
        assert_eq!((plan.bytes, plan.huge_pages_unpadded), (0, Some(2)));
    }

    #[test]
    fn auto_pads_when_the_text_ends_inside_the_last_page() {
        // 3 MiB hot in 3.5 MiB of text: the second page would be lost.
        let plan = plan_padding(Padding::Auto, 3 * MB, Some(3 * MB + 512 * KB));
        assert!(plan.padded);
        assert_eq!(
            (plan.huge_pages_padded, plan.huge_pages_unpadded),
            (2, Some(1))
        );
    }

    #[test]
    fn auto_pads_without_a_binary_and_never_never_pads() {
        assert!(plan_padding(Padding::Auto, 100, None).padded);
        let never = plan_padding(Padding::Never, 127 * KB, Some(MB));
        assert!(!never.padded);
        assert_eq!((never.bytes, never.huge_pages_unpadded), (0, Some(0)));
        let always = plan_padding(Padding::Always, 3 * MB, Some(40 * MB));
        assert_eq!((always.padded, always.bytes), (true, MB));
    }

    #[test]
    fn an_empty_range_is_never_padded_by_auto() {
        let plan = plan_padding(Padding::Auto, 0, None);
        assert_eq!(
            (plan.padded, plan.bytes, plan.huge_pages_padded),
            (false, 0, 0)
        );
    }

    #[test]
    fn a_range_of_whole_pages_needs_no_padding_bytes() {
        let plan = plan_padding(Padding::Always, 4 * MB, Some(4 * MB));
        assert_eq!((plan.bytes, plan.huge_pages_padded), (0, 2));
        assert!(!plan_padding(Padding::Auto, 4 * MB, Some(4 * MB)).padded);
    }
}
