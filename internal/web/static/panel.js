export function showPanel(root, back) { root.textContent = "The control panel is not built yet."; }
