; Outline patterns for Java. Captures: @definition.<kind> spans the definition (annotations
; included), @name is its name. Records count as classes, annotation types as interfaces.

(class_declaration name: (identifier) @name) @definition.class

(record_declaration name: (identifier) @name) @definition.class

(interface_declaration name: (identifier) @name) @definition.interface

(annotation_type_declaration name: (identifier) @name) @definition.interface

(enum_declaration name: (identifier) @name) @definition.enum

(method_declaration name: (identifier) @name) @definition.method

(constructor_declaration name: (identifier) @name) @definition.method

(compact_constructor_declaration name: (identifier) @name) @definition.method

(annotation_type_element_declaration name: (identifier) @name) @definition.method

(field_declaration
  (modifiers "static" "final")
  declarator: (variable_declarator name: (identifier) @name)) @definition.constant
