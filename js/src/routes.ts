// RoutesView: information-flow routes over the tokens, one row per level; see lib/layeredview.ts.

import { LayeredView } from "./lib/layeredview";
import { mount } from "./lib/view";

export default mount((props) => new LayeredView(props, "routes"));
