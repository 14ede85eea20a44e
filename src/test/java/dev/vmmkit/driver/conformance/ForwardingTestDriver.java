package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.VmmDriver;

/** Forwards every call; tests override one method to make a deliberately broken driver. */
class ForwardingTestDriver extends ForwardingDriver {

    ForwardingTestDriver(VmmDriver delegate) {
        super(delegate);
    }
}
