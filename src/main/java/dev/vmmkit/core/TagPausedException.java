package dev.vmmkit.core;

/** An allocation into a tag that is paused (or partly paused or resumed): resume the tag first. */
public final class TagPausedException extends IllegalStateException {
    private final String tag;

    public TagPausedException(String tag) {
        super("memory tag '" + tag + "' is paused: resume it before allocating in it");
        this.tag = tag;
    }

    public String tag() {
        return tag;
    }
}
